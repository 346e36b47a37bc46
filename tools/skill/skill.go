// Package skill is the Skills family: instructions an admin publishes once
// for the organisation's agents, loaded whole by load_skill on a turn of an
// agent that binds them.
package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	entskill "github.com/toolgate/toolgate/ent/skill"
	"github.com/toolgate/toolgate/tools"
)

// Family is the family's name in the catalogue.
const Family = "skills"

// The limits of a skill and of an agent's skills.
const (
	// MaxName is the longest skill name.
	MaxName = 64
	// MaxDescription is the longest description: it is paid in load_skill's
	// description on every model call of the agent's turns.
	MaxDescription = 200
	// MaxInstructions is the longest instructions, in characters.
	MaxInstructions = 100_000
	// MaxBound is the most skills an agent binds, so load_skill's
	// description stays within the catalogue's ceilings.
	MaxBound = 8
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

const description = "Load the instructions of one of your skills, by name, whole, and follow them. Load a skill when the " +
	"task is what its description says, before you start that work. Don't load one for anything else, or the same " +
	"skill twice in a turn."

// Load is load_skill.
var Load = tools.Definition{
	Name:        "load_skill",
	Brief:       "Load one of your skills' instructions by name, and follow them.",
	Family:      Family,
	Description: description + " Skills: none bound.",
	Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"one skill name from the list"}},` +
		`"required":["name"],"additionalProperties":false}`),
	Offered:   tools.OfferSkillBound,
	Effect:    tools.EffectRead,
	Preview:   tools.PreviewExempt,
	Instructs: true,
	Limits:    map[string]int{"names": 1},
	Operation: `query($conversationId: ID, $name: String!) {
  loadSkill(conversationId: $conversationId, name: $name) { name instructions }
}`,
	Field:    "loadSkill",
	Describe: describe,
}

// describe names the skills the agent binds, each with its description.
func describe(b tools.Bound) string {
	if len(b.Skills) == 0 {
		return description + " Skills: none bound."
	}
	var s strings.Builder
	s.WriteString(description)
	s.WriteString(" Skills:")
	for _, k := range b.Skills {
		fmt.Fprintf(&s, "\n- %s: %s", k.Name, k.Description)
	}
	return s.String()
}

// Definitions are the family's tools, in registration order.
var Definitions = []tools.Definition{Load}

// CheckName refuses a name a skill cannot have.
func CheckName(name string) error {
	if len(name) > MaxName || !nameRE.MatchString(name) {
		return tools.Refusef("skill name %q: want at most %d lower-case letters, digits, '-' and '_', starting with a letter or digit", name, MaxName)
	}
	return nil
}

// Published is a skill as an admin publishes it.
type Published struct {
	Name, Description, Instructions string
}

// Check refuses a skill that cannot be published, naming the field.
func (p Published) Check() error {
	if err := CheckName(p.Name); err != nil {
		return err
	}
	if d := strings.TrimSpace(p.Description); d == "" || utf8.RuneCountInString(d) > MaxDescription {
		return tools.Refusef("description: want 1 to %d characters: it is what the model reads to decide whether to load the skill", MaxDescription)
	}
	if i := strings.TrimSpace(p.Instructions); i == "" || utf8.RuneCountInString(i) > MaxInstructions {
		return tools.Refusef("instructions: want 1 to %d characters", MaxInstructions)
	}
	return nil
}

// Publish creates the organisation's skill, or replaces the description and
// instructions of the one of the same name. c is the admin's client.
func Publish(ctx context.Context, c *ent.Client, org, by int, p Published) (*ent.Skill, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	desc, instr := strings.TrimSpace(p.Description), strings.TrimSpace(p.Instructions)
	s, err := c.Skill.Query().Where(entskill.OrganizationID(org), entskill.Name(p.Name)).Only(ctx)
	switch {
	case err == nil:
		return s.Update().SetDescription(desc).SetInstructions(instr).SetPublishedBy(by).Save(ctx)
	case !ent.IsNotFound(err):
		return nil, fmt.Errorf("load skill: %w", err)
	}
	return c.Skill.Create().SetOrganizationID(org).SetName(p.Name).SetDescription(desc).
		SetInstructions(instr).SetPublishedBy(by).Save(ctx)
}

// CheckBound refuses names an agent cannot bind: more than MaxBound, or a
// name the organisation has not published (the published names are listed).
// c reads the organisation's skills.
func CheckBound(ctx context.Context, c *ent.Client, names []string) ([]string, error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if len(names) > MaxBound {
		return nil, tools.Refusef("skills: at most %d per agent", MaxBound)
	}
	if len(names) == 0 {
		return []string{}, nil
	}
	found, err := c.Skill.Query().Where(entskill.NameIn(names...)).Select(entskill.FieldName).Strings(ctx)
	if err != nil {
		return nil, fmt.Errorf("load skills: %w", err)
	}
	for _, n := range names {
		if !slices.Contains(found, n) {
			all, err := c.Skill.Query().Order(ent.Asc(entskill.FieldName)).Select(entskill.FieldName).Strings(ctx)
			if err != nil {
				return nil, fmt.Errorf("load skills: %w", err)
			}
			return nil, tools.Refusef("skills: %q is not a published skill; published: %s", n, listOrNone(all))
		}
	}
	return names, nil
}

// Briefs returns the named skills of the organisation as load_skill's
// description names them, in the agent's order; a name no longer published
// is left out. c reads the organisation's skills.
func Briefs(ctx context.Context, c *ent.Client, org int, names []string) ([]tools.SkillBrief, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := c.Skill.Query().Where(entskill.OrganizationID(org), entskill.NameIn(names...)).
		Select(entskill.FieldName, entskill.FieldDescription).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load skills: %w", err)
	}
	var out []tools.SkillBrief
	for _, n := range names {
		if i := slices.IndexFunc(rows, func(s *ent.Skill) bool { return s.Name == n }); i >= 0 {
			out = append(out, tools.SkillBrief{Name: n, Description: rows[i].Description})
		}
	}
	return out, nil
}

// Find returns the bound skill named name with its instructions. A name
// the agent does not bind, or that is not published, is refused with the
// names the agent binds, the same whether or not another agent or
// organisation has such a skill. c reads the organisation's skills.
func Find(ctx context.Context, c *ent.Client, org int, bound []string, name string) (*ent.Skill, error) {
	if slices.Contains(bound, name) {
		s, err := c.Skill.Query().Where(entskill.OrganizationID(org), entskill.Name(name)).Only(ctx)
		if err == nil {
			return s, nil
		}
		if !ent.IsNotFound(err) {
			return nil, fmt.Errorf("load skill: %w", err)
		}
	}
	briefs, err := Briefs(ctx, c, org, bound)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(briefs))
	for i, b := range briefs {
		names[i] = b.Name
	}
	return nil, tools.Refusef("no skill named %q; your skills: %s", name, listOrNone(names))
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
