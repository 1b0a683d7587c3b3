package lifecycle

import (
	"context"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
)

// SetIdentity replaces the operator's identity (apply_name, apply_email)
// while the manager serves: the next apply uses it.
func (kn *kernel) SetIdentity(id gitx.Identity) { kn.identity.Store(&id) }

func (kn *kernel) operatorIdentity() gitx.Identity {
	if id := kn.identity.Load(); id != nil {
		return *id
	}
	return kn.Identity
}

// author is who an apply's commit is authored by: the request's identity
// if it names both, else, field by field, the operator's (apply_name,
// apply_email), else the user's user.name and user.email as git reads them
// in the project (its local configuration over the user's global one).
// Both are read at each apply, so a change is seen without a restart.
func (kn *kernel) author(ctx context.Context, root string, who gitx.Identity) (gitx.Identity, error) {
	if who.Name != "" && who.Email != "" {
		return who, nil
	}
	who = kn.operatorIdentity()
	if who.Name != "" && who.Email != "" {
		return who, nil
	}
	git, err := kn.Git.UserIdentity(ctx, root, kn.GitUser)
	if err != nil {
		kn.log().Error("cannot read the user's git identity", "root", root, "err", err)
		return who, paddock.Errorf(paddock.CodeBadRequest, "no identity to author the commit: your git configuration could not be read (%v); "+
			"fix it, set apply_name and apply_email in paddock.toml, or give --author", err)
	}
	if who.Name == "" {
		who.Name = git.Name
	}
	if who.Email == "" {
		who.Email = git.Email
	}
	if who.Name == "" || who.Email == "" {
		return who, paddock.Errorf(paddock.CodeBadRequest, "no identity to author the commit: set user.name and user.email in your git configuration "+
			"(git config --global user.email you@example.com), apply_name and apply_email in paddock.toml, or give --author")
	}
	return who, nil
}
