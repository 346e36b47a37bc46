package repair_test

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/runtime/repair"
)

func ExampleTool_Fix() {
	tool, err := repair.Compile("write_file", json.RawMessage(`{
		"type": "object",
		"properties": {
			"files": {
				"type": "array",
				"items": {
					"type": "object",
					"properties": {"path": {"type": "string"}, "content": {"type": "string"}},
					"required": ["path", "content"],
					"additionalProperties": false
				}
			}
		},
		"required": ["files"],
		"additionalProperties": false
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}

	// One file flattened into the call is folded back into its list.
	fixed, repairs, err := tool.Fix(json.RawMessage(`{"path": "notes.md", "content": "# Notes"}`))
	fmt.Println(string(fixed), err)
	for _, r := range repairs {
		fmt.Printf("rule %d (%s) at %s: %s\n", r.Rule, r.Rule, r.Path, r.Note)
	}

	// What no rule can mend is refused, in words the model can act on.
	_, _, err = tool.Fix(json.RawMessage(`{"files": [{"path": "notes.md", "body": "# Notes"}]}`))
	fmt.Println(err)
	// Output:
	// {"files":[{"content":"# Notes","path":"notes.md"}]} <nil>
	// rule 3 (fold-into-list) at files: folded "content", "path" into a one-element list
	// missing required argument "files[0].content"; unknown argument "files[0].body" (known: "content", "path")
}
