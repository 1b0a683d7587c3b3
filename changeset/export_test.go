package changeset

// KeepSnapshotDirs makes SnapshotTree keep at most n directories' names,
// empty of any, until the function it returns puts the bound back.
func KeepSnapshotDirs(n int) (restore func()) {
	snapshotNames.Lock()
	old := maxSnapshotDirs
	maxSnapshotDirs, snapshotNames.m = n, map[string][]string{}
	snapshotNames.Unlock()
	return func() {
		snapshotNames.Lock()
		maxSnapshotDirs, snapshotNames.m = old, map[string][]string{}
		snapshotNames.Unlock()
	}
}

// SnapshotDirsKept is how many directories' names SnapshotTree keeps.
func SnapshotDirsKept() int {
	snapshotNames.Lock()
	defer snapshotNames.Unlock()
	return len(snapshotNames.m)
}

// KeptAsWritten reports whether w's Build kept the diff as git wrote it
// and the hash taken on the way (nothing to mask), rather than masking
// and hashing it after.
func KeptAsWritten(w *Watch) bool { return w.kept }
