package lifecycle

// blobPath is where a frozen blob of a run is kept.
func (m *Manager) blobPath(id, blob string) string { return m.changeSets(id).BlobPath(blob) }
