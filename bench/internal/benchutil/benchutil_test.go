package benchutil

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLeftovers: a process whose parent ends without it becomes the
// subreaper's child, and Leftovers finds it, kills it and names it; a
// child that ends is reaped and not named.
func TestLeftovers(t *testing.T) {
	if err := Subreaper(); err != nil {
		t.Fatal(err)
	}
	if left := Leftovers(time.Second); len(left) != 0 {
		t.Fatalf("children before the test: %v", left)
	}
	// sh starts sleep in the background and exits: sleep is an orphan.
	if err := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 &").Run(); err != nil {
		t.Fatal(err)
	}
	// And one that ends on its own, orphaned too: reaped, not named.
	if err := exec.Command("sh", "-c", "sleep 0.2 >/dev/null 2>&1 &").Run(); err != nil {
		t.Fatal(err)
	}
	left := Leftovers(time.Second)
	if len(left) != 1 || !strings.Contains(left[0], "sleep 300") {
		t.Fatalf("left behind: %v, want the sleep 300 alone", left)
	}
	if again := Leftovers(0); len(again) != 0 {
		t.Fatalf("after the kill: %v", again)
	}
}
