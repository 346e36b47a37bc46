package workspace_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/workspace"
)

// BenchmarkSearch searches a workspace of 100 files of 50 KB (5 MB) on
// SQLite: an ASCII string, which the database narrows to the few files
// that hold it, and a non-ASCII one, which reads every file.
func BenchmarkSearch(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	ctx := tenancy.System(context.Background())
	line := strings.Repeat("lorem ipsum dolor sit amet ", 3) + "\n"
	creates := make([]*ent.WorkspaceFileCreate, 100)
	for i := range creates {
		body := strings.Repeat(line, 50_000/len(line))
		if i%10 == 0 {
			body += fmt.Sprintf("the Needle %d\nünïcode Straße\n", i)
		}
		creates[i] = tb.client.WorkspaceFile.Create().SetConversationID(tb.conv).SetPath(fmt.Sprintf("f/%03d.txt", i)).
			SetContent(body).SetChars(int64(len(body))).SetBytes(int64(len(body)))
	}
	tb.client.WorkspaceFile.CreateBulk(creates...).ExecX(ctx)
	for _, q := range []string{"needle", "STRASSE", "straße"} {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := tb.ws().Search(ctx, []string{q}, nil)
				require.NoError(b, err)
				if q == "STRASSE" {
					require.Zero(b, res.Hits)
				} else {
					require.Equal(b, 10, res.Hits)
				}
			}
		})
	}
}

// BenchmarkExport exports a nested field and a between region of a 1 MB
// stored JSON result, rolled back each time.
func BenchmarkExport(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	one := largeResult(b)
	pad := strings.Repeat(one+",", (1<<20)/len(one))
	big := `{"pad": [` + pad + `{}], "data": {"items": [], "report": "{\"summary\": {\"csv\": \"BEGIN\\nx\\nEND\"}}"}}`
	tb.store(b, stored{ref: "big", content: big})
	ctx := tenancy.System(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		tx, err := tb.client.Tx(ctx)
		require.NoError(b, err)
		res, err := workspace.New(tx.Client(), tb.conv).Write(ctx, []*workspace.FileInput{
			export("a.csv", &workspace.Source{Ref: "big", Field: field("data", "report", "summary", "csv"), Between: []string{"BEGIN\n", "END"}}),
		})
		require.NoError(b, err)
		require.Equal(b, 2, res.Files[0].Chars)
		require.NoError(b, tx.Rollback())
	}
}
