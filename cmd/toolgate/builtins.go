package main

import (
	"github.com/toolgate/toolgate/runtime/dispatch"
)

// builtins are the tools the runtime carries out itself, without a
// resolver route.
func builtins() map[string]dispatch.Builtin {
	return map[string]dispatch.Builtin{}
}
