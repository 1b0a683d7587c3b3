package paddock

// Access is what an agent may do to its run's workspace (record 000): part of
// its definition, not a tool list.
type Access string

const (
	// AccessWrite offers every working tool (the default).
	AccessWrite Access = "write"
	// AccessRead offers only tools that cannot change the workspace.
	AccessRead Access = "read"
	// AccessNone makes no workspace and offers no working tool: the agent
	// only converses and picks from its menu.
	AccessNone Access = "none"
)

// ParseAccess validates an access mode; "" means write.
func ParseAccess(s string) (Access, error) {
	switch Access(s) {
	case "", AccessWrite:
		return AccessWrite, nil
	case AccessRead:
		return AccessRead, nil
	case AccessNone:
		return AccessNone, nil
	}
	return "", Errorf(CodeBadRequest, "unknown access %q (write, read or none)", s)
}
