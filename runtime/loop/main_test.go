package loop_test

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/tools/code"
)

func TestMain(m *testing.M) {
	// run_code's sandbox children are this test binary, re-executed.
	code.ServeChildIfAsked()
	os.Exit(m.Run())
}
