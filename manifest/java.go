package manifest

import (
	"path"
	"slices"
	"strings"
)

// java: Maven (pom.xml; an aggregator with <modules> covers the poms below
// it) and Gradle (a settings.gradle covers the builds below it; a lone
// build.gradle or gradlew is a build of its own). The wrapper in the
// directory runs the build when there is one. Tests are read from the
// JUnit reports surefire and Gradle write.
func (d *detector) java() {
	d.maven()
	d.gradle()
}

func (d *detector) maven() {
	var dirs []string
	poms := map[string]string{}
	for _, p := range d.ix.named("pom.xml") {
		b, _ := d.ix.read(p)
		dirs = append(dirs, dirOf(p))
		poms[dirOf(p)] = string(b)
	}
	for _, dir := range dirs {
		if d.isCovered("java", dir) || !strings.Contains(poms[dir], "<modules>") {
			continue
		}
		for _, o := range dirs {
			if o != dir && within(o, dir) {
				d.cover("java", o)
			}
		}
	}
	for _, dir := range dirs {
		if d.isCovered("java", dir) {
			continue
		}
		pom := poms[dir]
		c := Component{Dir: dir, Ecosystem: "java", Adapter: "maven", Why: join(dir, "pom.xml")}
		for _, o := range dirs {
			if o != dir && within(o, dir) {
				c.Members = append(c.Members, o)
			}
		}
		mvn := []string{"mvn"}
		if d.ix.has(join(dir, "mvnw")) {
			mvn = []string{"./mvnw"}
		}
		if p := join(dir, ".mvn/wrapper/maven-wrapper.properties"); d.ix.has(p) {
			b, _ := d.ix.read(p)
			url := properties(b, "distributionUrl")
			if v := between(path.Base(url), "apache-maven-", "-bin"); v != "" {
				c.Tools = []Tool{{Name: "maven", Version: v, From: p + " distributionUrl"}}
			}
		}
		ch := func(name string, args ...string) Check {
			return Check{Name: name, Dir: dir, Argv: append(append(slices.Clone(mvn), "-B", "-o"), args...), Why: c.Why}
		}
		reports := "target/surefire-reports/TEST-*.xml"
		if len(c.Members) > 0 {
			reports = "**/" + reports
		}
		t := ch(CheckTest, "test")
		t.Results, t.Runner = ResultsJUnit+":"+path.Join(dir, reports), "surefire"
		c.Checks = []Check{ch(CheckBuild, "test-compile")}
		if strings.Contains(pom, "maven-checkstyle-plugin") {
			c.Checks = append(c.Checks, ch(CheckLint, "checkstyle:check"))
		}
		c.Checks = append(c.Checks, t)
		if strings.Contains(pom, "spotless-maven-plugin") {
			c.Checks = append(c.Checks, ch(CheckFormatCheck, "spotless:check"))
		}
		d.add(c)
	}
}

var gradleFiles = []string{"settings.gradle", "settings.gradle.kts", "build.gradle", "build.gradle.kts", "gradlew"}

func (d *detector) gradle() {
	var dirs []string
	for _, name := range gradleFiles {
		for _, p := range d.ix.named(name) {
			if !slices.Contains(dirs, dirOf(p)) {
				dirs = append(dirs, dirOf(p))
			}
		}
	}
	slices.Sort(dirs)
	isRoot := func(dir string) bool {
		return d.ix.has(join(dir, "settings.gradle")) || d.ix.has(join(dir, "settings.gradle.kts"))
	}
	covered := map[string]bool{}
	for _, dir := range dirs {
		if covered[dir] || !isRoot(dir) {
			continue
		}
		for _, o := range dirs {
			if o != dir && within(o, dir) {
				covered[o] = true
			}
		}
	}
	for _, dir := range dirs {
		if covered[dir] {
			continue
		}
		c := Component{Dir: dir, Ecosystem: "java", Adapter: "gradle"}
		var build string
		for _, name := range gradleFiles {
			if p := join(dir, name); d.ix.has(p) {
				if c.Why == "" {
					c.Why = p
				}
				if b, ok := d.ix.read(p); ok && name != "gradlew" {
					build += string(b)
				}
			}
		}
		for _, o := range dirs {
			if o != dir && within(o, dir) {
				c.Members = append(c.Members, o)
				for _, name := range gradleFiles[2:4] {
					if b, ok := d.ix.read(join(o, name)); ok {
						build += string(b)
					}
				}
			}
		}
		gradle := []string{"gradle"}
		if d.ix.has(join(dir, "gradlew")) {
			gradle = []string{"./gradlew"}
		}
		if p := join(dir, "gradle/wrapper/gradle-wrapper.properties"); d.ix.has(p) {
			b, _ := d.ix.read(p)
			base := path.Base(properties(b, "distributionUrl"))
			v := between(base, "gradle-", "-bin.zip")
			if v == "" {
				v = between(base, "gradle-", "-all.zip")
			}
			if v != "" {
				c.Tools = []Tool{{Name: "gradle", Version: v, From: p + " distributionUrl"}}
			}
		}
		ch := func(name string, tasks ...string) Check {
			return Check{Name: name, Dir: dir, Argv: append(append(slices.Clone(gradle), "--no-daemon", "--offline"), tasks...), Why: c.Why}
		}
		t := ch(CheckTest, "test")
		t.Results, t.Runner = ResultsJUnit+":"+path.Join(dir, "**/build/test-results/test/TEST-*.xml"), "gradle test"
		c.Checks = []Check{ch(CheckBuild, "assemble", "testClasses")}
		if strings.Contains(build, "checkstyle") {
			c.Checks = append(c.Checks, ch(CheckLint, "checkstyleMain", "checkstyleTest"))
		}
		c.Checks = append(c.Checks, t)
		if strings.Contains(build, "spotless") {
			c.Checks = append(c.Checks, ch(CheckFormatCheck, "spotlessCheck"))
		}
		d.add(c)
	}
}
