// Package ent is generated from ent/schema; see `make generate`.
package ent

//go:generate go run -mod=mod entc.go
