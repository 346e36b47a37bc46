package skill

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
)

func TestDescribeNamesTheBoundSkills(t *testing.T) {
	t.Parallel()
	none := Load.For(tools.Bound{})
	require.Equal(t, Load.Description, none.Description)
	two := Load.For(tools.Bound{Skills: []tools.SkillBrief{{Name: "notes", Description: "Meeting notes."}, {Name: "audit", Description: "Checks."}}})
	require.Contains(t, two.Description, "Skills:\n- notes: Meeting notes.\n- audit: Checks.")
	require.NotContains(t, two.Description, "none bound")
	require.True(t, Load.Acknowledges(), "instructions are no evidence")
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"notes", "release-notes", "q3_audit", "9lives"} {
		require.NoError(t, CheckName(ok), ok)
	}
	for _, bad := range []string{"", "Notes", "-x", "a b", "ü", string(make([]byte, MaxName+1))} {
		require.Error(t, CheckName(bad), bad)
	}
}

func TestPublishedCheck(t *testing.T) {
	t.Parallel()
	require.NoError(t, Published{Name: "n", Description: "d", Instructions: "i"}.Check())
	long := make([]rune, MaxDescription+1)
	for i := range long {
		long[i] = 'é'
	}
	require.ErrorContains(t, Published{Name: "n", Description: string(long), Instructions: "i"}.Check(), "description")
	require.ErrorContains(t, Published{Name: "n", Description: "d", Instructions: " \n"}.Check(), "instructions")
}
