package confine

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// # Folding names
//
// A protected name must be refused however it is spelled, so every rule
// about names compares folded names. Fold is the one place that says what
// "the same name" means, for one path component:
//
//  1. NFKC: canonical twins (NFC and NFD spellings of "é") and compatibility
//     forms (full-width "ｇ", the Kelvin sign, ligatures, "․" one dot leader)
//     become one spelling.
//  2. Full Unicode case folding: what case-insensitive file systems (NTFS,
//     HFS+, APFS) and people both treat as one name.
//  3. Default-ignorable code points (zero-width joiners and spaces, soft
//     hyphen, byte-order mark, bidi controls, variation selectors) are
//     dropped: they are invisible, and HFS+ ignores them when it looks a
//     name up (git's is_hfs_dotgit).
//  4. Look-alikes: a letter of the Latin, Greek or Cyrillic script (and a
//     few punctuation marks) that renders like an ASCII letter, dot or
//     hyphen is replaced by it, in the manner of the skeletons of Unicode
//     TS #39 (".vscodе" with a Cyrillic е is ".vscode"). ASCII itself is
//     never mapped: an ASCII name folds to its lower case and nothing else,
//     so no ordinary name ("docs/claude.md", "l0g") is taken for another.
//  5. What Windows drops at the end of a name (trailing dots and spaces) and
//     an NTFS stream suffix (":…") are cut.
//
// The fold is for comparing names, never for making them: what a change set
// holds and applies is the name's bytes (invariant 14).

// Fold reduces one path component to the name every rule compares.
func Fold(name string) string {
	if ascii(name) {
		return trimName(strings.ToLower(name))
	}
	return trimName(fold(name))
}

// How two names that fold alike differ (see Alike).
const (
	AlikeNormalisation = "Unicode normalisation" // composed and decomposed é
	AlikeCase          = "case"                  // README.md and readme.md
	AlikeSpelling      = "look-alike or invisible characters, or what Windows drops"
)

// Alike says how two different paths that fold to one (component by
// component, see Fold) differ: only in Unicode normalisation (their NFC
// forms are equal), else also in case, else in what only the rest of the
// fold takes away (look-alikes, invisible code points, trailing dots and
// spaces). It is "" for equal paths and for paths that fold apart.
func Alike(a, b string) string {
	if a == b || FoldPath(a) != FoldPath(b) {
		return ""
	}
	na, nb := norm.NFC.String(a), norm.NFC.String(b)
	switch {
	case na == nb:
		return AlikeNormalisation
	case cases.Fold().String(na) == cases.Fold().String(nb):
		return AlikeCase
	}
	return AlikeSpelling
}

// fold runs steps 1 to 4 on a name with non-ASCII code points. Look-alikes
// are mapped before NFKC (which makes the lunate sigma "ϲ", a c, a final
// sigma), before case folding (a capital Greek Eta looks like H, its small
// letter like n) and after it (the small forms of capitals the table does
// not list).
func fold(s string) string {
	s = skeleton(norm.NFD.String(s))
	s = norm.NFKC.String(s)
	s = skeleton(norm.NFD.String(s))
	s = cases.Fold().String(s)
	s = skeleton(norm.NFD.String(s))
	return norm.NFC.String(s)
}

// skeleton drops default-ignorable code points and maps look-alikes.
func skeleton(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if Ignorable(r) {
			continue
		}
		if m, ok := lookalikes[r]; ok {
			r = m
		}
		b.WriteRune(r)
	}
	return b.String()
}

func trimName(s string) string {
	if i := strings.IndexByte(s, ':'); i > 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ". ")
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldPattern folds the names of a doublestar pattern as Fold folds path
// components, leaving its syntax (and names without letters to fold) as
// they are.
func foldPattern(pat string) string {
	if ascii(pat) {
		return strings.ToLower(pat)
	}
	return fold(pat)
}

// Ignorable reports whether r is a default-ignorable code point (Unicode's
// derived property Default_Ignorable_Code_Point): rendered as nothing, so a
// name holding one looks like the name without it.
func Ignorable(r rune) bool {
	if r < 0x80 {
		return false
	}
	if unicode.Is(unicode.White_Space, r) || unicode.Is(unicode.Prepended_Concatenation_Mark, r) ||
		(r >= 0xFFF9 && r <= 0xFFFB) || (r >= 0x13430 && r <= 0x1343F) {
		return false
	}
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector)
}

// Disguised reports whether a name holds what a reader cannot see or could
// take for something else: a default-ignorable code point, a compatibility
// form (full-width letters, a Kelvin sign), a word that mixes Latin letters
// with Greek or Cyrillic ones, or look-alikes that make the whole name read
// as an ASCII name. A word wholly in Greek or Cyrillic is an ordinary name,
// and an NFD spelling is not a disguise.
func Disguised(name string) bool {
	if ascii(name) {
		return false
	}
	nfc := norm.NFC.String(name)
	if norm.NFKC.String(nfc) != nfc {
		return true
	}
	d := norm.NFD.String(nfc)
	mapped, latin, other := false, false, false // latin and other: of the current word
	for _, r := range d + " " {
		switch {
		case Ignorable(r):
			return true
		case unicode.IsLetter(r):
			latin = latin || unicode.Is(unicode.Latin, r)
			other = other || unicode.In(r, unicode.Greek, unicode.Cyrillic)
		case unicode.Is(unicode.Mn, r): // a mark belongs to its letter's word
		default:
			if latin && other {
				return true
			}
			latin, other = false, false
		}
		if _, ok := lookalikes[r]; ok {
			mapped = true
		}
	}
	return mapped && ascii(skeleton(d))
}

// lookalikes maps letters of the Latin, Greek and Cyrillic scripts (and
// punctuation) that render like an ASCII letter, dot or hyphen to it, in the
// spirit of the confusables of Unicode TS #39, restricted to targets in
// [a-z.-]. Sources are NFD base letters; accented forms decompose to them.
var lookalikes = map[rune]rune{
	// Latin letters outside ASCII: small capitals, dotless and script forms.
	'ɑ': 'a', 'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ɡ': 'g', 'ɢ': 'g', 'ǥ': 'g',
	'ʜ': 'h', 'ı': 'i', 'ɩ': 'i', 'ɪ': 'i', 'ȷ': 'j', 'ᴊ': 'j', 'ᴋ': 'k', 'ĸ': 'k', 'ǀ': 'l', 'ʟ': 'l',
	'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u', 'ʋ': 'u',
	'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z',
	// Greek capitals (before case folding) and small letters.
	'Α': 'a', 'Β': 'b', 'Ε': 'e', 'Ζ': 'z', 'Η': 'h', 'Ι': 'i', 'Κ': 'k', 'Μ': 'm', 'Ν': 'n',
	'Ο': 'o', 'Ρ': 'p', 'Τ': 't', 'Υ': 'y', 'Χ': 'x', 'Ϲ': 'c', 'Ϳ': 'j',
	'α': 'a', 'γ': 'y', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'σ': 'o',
	'τ': 't', 'υ': 'u', 'χ': 'x', 'ω': 'w', 'ϲ': 'c', 'ς': 'c', 'ϳ': 'j',
	// Cyrillic capitals (before case folding) and small letters.
	'А': 'a', 'В': 'b', 'Е': 'e', 'Ѕ': 's', 'І': 'i', 'Ј': 'j', 'К': 'k', 'М': 'm', 'Н': 'h',
	'О': 'o', 'Р': 'p', 'С': 'c', 'Т': 't', 'У': 'y', 'Х': 'x', 'Ү': 'y', 'Һ': 'h', 'Ӏ': 'i',
	'Ԁ': 'd', 'Ԍ': 'g', 'Ԛ': 'q', 'Ԝ': 'w', 'Ѵ': 'v',
	'а': 'a', 'в': 'b', 'г': 'r', 'е': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p',
	'с': 'c', 'т': 't', 'у': 'y', 'х': 'x', 'ь': 'b', 'ѕ': 's', 'і': 'i', 'ј': 'j', 'һ': 'h',
	'ӏ': 'l', 'ү': 'y', 'ԁ': 'd', 'ԍ': 'g', 'ԛ': 'q', 'ԝ': 'w', 'ѵ': 'v', 'ѡ': 'w', 'ҽ': 'e',
	// Dots and hyphens (NFKC already maps the full-width and small forms).
	'·': '.', '∙': '.', '⋅': '.', 'ꞏ': '.',
	'‐': '-', '‒': '-', '–': '-', '−': '-', '⁃': '-', '˗': '-',
}
