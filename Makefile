.DEFAULT_GOAL := help
GO ?= go
BIN := bin/toolgate
# golangci-lint, pinned; `go run` builds it once into the build cache, so a fresh
# machine needs nothing but Go.
GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: generate
generate: ## regenerate ent (entc), then the GraphQL server (gqlgen), then gqlgen.yml's field renames for the read path
	$(GO) run -mod=mod ./ent/entc.go
	$(GO) tool gqlgen generate
	$(GO) run ./graph/fieldnames.go

.PHONY: verify
verify: ## fail if go.mod/go.sum are untidy, or if regenerating changes the committed generated code
	@$(GO) mod tidy -diff || (echo "go.mod or go.sum is untidy: run 'go mod tidy' and commit" && exit 1)
	@$(MAKE) --no-print-directory generate
	@git diff --exit-code -- ent graph gqlgen.yml go.mod go.sum || (echo "generated code is stale: run 'make generate' and commit" && exit 1)
	@test -z "$$(git status --porcelain -- ent graph)" || (git status --porcelain -- ent graph; echo "untracked generated files: run 'make generate' and commit"; exit 1)

.PHONY: build
build: ## build the binary into bin/, stripped
	$(GO) build -trimpath -ldflags "-s -w" -o $(BIN) ./cmd/toolgate

.PHONY: run
run: build ## serve on the embedded SQLite default, seeding a demo on first start
	./$(BIN) serve --demo

.PHONY: test
test: ## the whole suite; PostgreSQL too when TEST_DATABASE_URL is set
	@if [ -z "$$TEST_DATABASE_URL" ]; then echo "TEST_DATABASE_URL is not set: PostgreSQL tests are skipped, SQLite only"; \
	else echo "PostgreSQL tests run against TEST_DATABASE_URL"; fi
	$(GO) test -race -count=1 -timeout 30m ./...

.PHONY: bench
bench: ## the benchmarks, with allocations
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: lint
lint: ## go vet, gofmt, and golangci-lint (staticcheck; depguard keeps the layering)
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GOLANGCI_LINT) run ./...
