package price

// defaults are public list prices in USD per million tokens. OpenAI bills
// cache writes as ordinary input; Anthropic bills 5-minute cache writes at
// 1.25 times input and cache reads at a tenth of it. Longer names win, so a
// family entry ("claude-opus-4") prices its snapshots while a newer member
// with its own price ("claude-opus-4-5") keeps it.
var defaults = map[string]Price{
	"gpt-4o":            {Input: 2.50, CacheRead: 1.25, CacheWrite: 2.50, Output: 10.00},
	"gpt-4o-2024-05-13": {Input: 5.00, CacheRead: 5.00, CacheWrite: 5.00, Output: 15.00},
	"gpt-4o-mini":       {Input: 0.15, CacheRead: 0.075, CacheWrite: 0.15, Output: 0.60},
	"gpt-4.1":           {Input: 2.00, CacheRead: 0.50, CacheWrite: 2.00, Output: 8.00},
	"gpt-4.1-mini":      {Input: 0.40, CacheRead: 0.10, CacheWrite: 0.40, Output: 1.60},
	"gpt-4.1-nano":      {Input: 0.10, CacheRead: 0.025, CacheWrite: 0.10, Output: 0.40},
	"gpt-5":             {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10.00},
	"gpt-5-mini":        {Input: 0.25, CacheRead: 0.025, CacheWrite: 0.25, Output: 2.00},
	"gpt-5-nano":        {Input: 0.05, CacheRead: 0.005, CacheWrite: 0.05, Output: 0.40},
	"o1":                {Input: 15.00, CacheRead: 7.50, CacheWrite: 15.00, Output: 60.00},
	"o3":                {Input: 2.00, CacheRead: 0.50, CacheWrite: 2.00, Output: 8.00},
	"o3-mini":           {Input: 1.10, CacheRead: 0.55, CacheWrite: 1.10, Output: 4.40},
	"o4-mini":           {Input: 1.10, CacheRead: 0.275, CacheWrite: 1.10, Output: 4.40},

	"claude-opus-4":     {Input: 15.00, CacheRead: 1.50, CacheWrite: 18.75, Output: 75.00},
	"claude-opus-4-5":   {Input: 5.00, CacheRead: 0.50, CacheWrite: 6.25, Output: 25.00},
	"claude-sonnet-4":   {Input: 3.00, CacheRead: 0.30, CacheWrite: 3.75, Output: 15.00},
	"claude-haiku-4-5":  {Input: 1.00, CacheRead: 0.10, CacheWrite: 1.25, Output: 5.00},
	"claude-3-opus":     {Input: 15.00, CacheRead: 1.50, CacheWrite: 18.75, Output: 75.00},
	"claude-3-7-sonnet": {Input: 3.00, CacheRead: 0.30, CacheWrite: 3.75, Output: 15.00},
	"claude-3-5-sonnet": {Input: 3.00, CacheRead: 0.30, CacheWrite: 3.75, Output: 15.00},
	"claude-3-5-haiku":  {Input: 0.80, CacheRead: 0.08, CacheWrite: 1.00, Output: 4.00},
	"claude-3-haiku":    {Input: 0.25, CacheRead: 0.03, CacheWrite: 0.30, Output: 1.25},

	// Replayed calls carry estimated token counts (o200k, see the replay
	// provider), priced at gpt-4.1's list price, the OpenAI provider's
	// default model, so a demo's cost view shows what a real one would
	// bill; the usage API and the console mark it as estimated.
	"replay": {Input: 2.00, CacheRead: 0.50, CacheWrite: 2.00, Output: 8.00},
}
