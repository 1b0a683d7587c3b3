// Package apply writes an approved change set into a project's working
// tree, undoes it, and after a kill -9 at any point finishes or rolls back
// what was under way, from a journal kept in the run's directory.
//
// # What it guarantees
//
//   - All or nothing: every new content is staged (written beside its
//     target, in a directory that stays) and every old one kept before
//     anything is put in place; the journal says which of the two a
//     restart must finish (Recover). The tree is left either as it was or
//     as approved, never between.
//   - Nothing is written, read or removed through a symbolic link in the
//     working tree, one there when the apply checked or one swapped in
//     since: every path is reached by opening each directory on the way
//     with O_NOFOLLOW at the moment of use (tree.go).
//   - Before it reports success an apply verifies the tree it leaves (type,
//     mode, permission bits and blob id of every path); if that fails it
//     is rolled back and a *Mismatch returned.
//   - Undo gives the tree back exactly, directories' modes and files'
//     permission bits included, if every path is still as the apply left
//     it; otherwise it refuses and changes nothing.
//   - NeverApplied judges a frozen change set again from its content:
//     .git, links into .git, to a protected path or out of the project.
//
// # What it does not do
//
//   - It takes no lock: the caller holds the project's (lifecycle does).
//   - It does not use os.Root (nor confine.Root): an os.Root follows a
//     symbolic link as long as it stays inside the root, and a link to
//     .git/hooks stays inside. The tree here follows none, which os.Root
//     has no mode for.
//   - It does not touch the index, and does not read the change set's
//     store: the caller gives the entries, and the Applier's RunDir and
//     BlobPath say where the journal, the backups and the frozen blobs are.
//   - Linux only (the *at system calls, syncfs).
package apply
