// Package preview turns a stored tool result into what the model receives
// in its place: the whole result when it fits the limit, otherwise a
// structured preview that keeps the result's shape, says what was left out,
// and names the ref the model can read the rest through.
//
// # Whole results
//
// A result whose characters fit within the limit (6,000 by default) passes
// as it is. A JSON result that only fits once its insignificant whitespace
// is dropped passes compacted; nothing else is changed. Media passes as it
// is: it is never previewed.
//
// # JSON previews
//
// A JSON preview is one JSON object of at most limit characters (counted on
// the exact bytes returned). It always carries the result context:
//
//	"_toolResultContext": {"ref": "r_8f2k", "chars": 10485760, "bytes": 10485812,
//	                       "items": 4000, "partial": true}
//
// chars, bytes and items are the stored result's counts (items: elements of a
// top-level array, keys of a top-level object, 1 for a scalar);
// "truncatedAtSource": true is added when the tool itself cut the result
// before it was stored. Where the context sits depends on the top-level
// value:
//
//	object:  {"_toolResultContext": {…}, "id": 7, "title": "…", …}
//	array:   {"_toolResultContext": {…}, "items": [ … ]}
//	scalar:  {"_toolResultContext": {…}, "value": "…"}
//
// so a top-level object keeps its field paths, and an array's items keep
// their indexes under "items". Inside, values are shown whole while they fit
// and cut otherwise, always leaving valid JSON behind:
//
//   - a cut string keeps its head and ends with a marker giving the
//     characters left out and its original length in characters:
//     "Quarterly results were…[+4821 chars, 5000 in all]"
//     (a number too long for its share is shown the same way, as a string);
//   - a cut array keeps its first items, each whole or itself cut, and ends
//     with one marker item: "…[+3996 items, 4000 in all]";
//   - a cut object keeps its first keys in order, each value whole or cut,
//     and ends with one marker member: "…": "[+12 keys, 20 in all]".
//
// Budgets are shared so that the preview shows the shape before the detail:
// an object gives every key it can show at least a fair share and lets the
// small values pass whole; an array shows its leading items whole while they
// fit, or splits the budget among its first three when they are large.
//
// # Text previews
//
// A text result that does not fit, and a JSON result that is not valid JSON
// (a document cut short, say), preview as
//
//	{"_toolResultContext": {…}, "head": "first part…",
//	 "omitted": {"fromChar": 4390, "toChar": 98210}, "tail": "…last part"}
//
// where items counts lines, head is the start of the text (three quarters of
// the room), tail its end, and omitted gives the character offsets of the
// part in between, ready to hand to a windowed read. Cuts fall after a line
// break when one is close.
//
// # Visible spans
//
// Every Result lists the byte ranges of the original content whose text
// reached the model: the whole content when it passed whole; for text, the
// head and the tail; for JSON, each value shown whole (a whole object member
// from its key to the end of its value), each key shown, and the shown head
// of each cut string from its opening quote. Neighbouring ranges separated
// only by JSON punctuation and whitespace are merged.
//
// # Cost
//
// JSON is read in one pass by a byte scanner that records only the values
// a preview could show (nodes pointing into the content, never copies of
// it) and skips the rest while still counting the items of the arrays and
// objects it records. Recorded values are checked strictly (escapes,
// control characters, UTF-8); skipped strings only have their end found,
// so a fault inside a string no preview shows does not turn the result
// into text. Structure is checked everywhere. The preview is then written
// from the nodes.
package preview
