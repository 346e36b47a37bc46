// Package result holds read_tool_result: reading windows and searching stored tool results.
package result
