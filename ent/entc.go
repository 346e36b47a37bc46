//go:build ignore

package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

func main() {
	ex, err := entgql.NewExtension(
		entgql.WithConfigPath("./gqlgen.yml"),
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("./graph/ent.graphqls"),
		entgql.WithWhereInputs(true),
		entgql.WithNodeDescriptor(false),
	)
	if err != nil {
		log.Fatalf("create entgql extension: %v", err)
	}
	err = entc.Generate("./ent/schema", &gen.Config{
		Features: []gen.Feature{
			gen.FeatureIntercept,
			gen.FeaturePrivacy,
			gen.FeatureGlobalID,
			gen.FeatureVersionedMigration,
			gen.FeatureUpsert,
			gen.FeatureExecQuery,
		},
	}, entc.Extensions(ex))
	if err != nil {
		log.Fatalf("run ent codegen: %v", err)
	}
}
