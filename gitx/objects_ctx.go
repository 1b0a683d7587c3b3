package gitx

import (
	"context"
	"fmt"
	"strings"
)

// Object stores of paddock's own.
//
// Some commits paddock makes are no one's to keep in a project: a review
// run's commit of the change set under review is unapproved content, and
// invariant 2 allows nothing but an apply of an approved change set into
// the project's object store. Such commits are written into an object
// directory paddock owns (CommitTreeInto), which borrows the project's
// objects; the commands that must see them read it as one more alternate
// (WithObjects), never as a place to write.

type objectsKey struct{}

// WithObjects returns ctx under which every git command also reads the
// object directories dirs (as GIT_ALTERNATE_OBJECT_DIRECTORIES): read
// only; what a command writes still goes to its repository's own store.
func WithObjects(ctx context.Context, dirs ...string) context.Context {
	if len(dirs) == 0 {
		return ctx
	}
	prev, _ := ctx.Value(objectsKey{}).([]string)
	return context.WithValue(ctx, objectsKey{}, append(append([]string{}, prev...), dirs...))
}

// withoutObjects is ctx under which git reads no object directory of
// WithObjects: for a write into a repository's own store, which must hold
// every object it names afterwards.
func withoutObjects(ctx context.Context) context.Context {
	if dirs, _ := ctx.Value(objectsKey{}).([]string); len(dirs) == 0 {
		return ctx
	}
	return context.WithValue(ctx, objectsKey{}, []string(nil))
}

// withObjectsEnv adds the object directories of ctx (WithObjects) to a
// command's environment env: to the alternates env names already (a
// diff's scratch store borrows the repository's objects that way), or as
// its own.
func withObjectsEnv(ctx context.Context, env []string) []string {
	dirs, _ := ctx.Value(objectsKey{}).([]string)
	if len(dirs) == 0 {
		return env
	}
	const name = "GIT_ALTERNATE_OBJECT_DIRECTORIES="
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name); ok {
			env[i] = name + strings.Join(append([]string{v}, dirs...), ":")
			return env
		}
	}
	return append(env, name+strings.Join(dirs, ":"))
}

// checkObjectDir refuses a directory git's colon-separated lists cannot
// carry as it is.
func checkObjectDir(dir string) error {
	if dir == "" || !strings.HasPrefix(dir, "/") || strings.ContainsAny(dir, ":\"\n\r\x00") {
		return fmt.Errorf("gitx: object directory %q: want an absolute path without ':', '\"' or newlines", dir)
	}
	return nil
}
