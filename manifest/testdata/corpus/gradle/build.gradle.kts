plugins {
    id("com.diffplug.spotless") version "6.25.0"
    checkstyle
}
