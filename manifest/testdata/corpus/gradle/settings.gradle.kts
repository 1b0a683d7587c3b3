rootProject.name = "inventory"
include("app", "lib")
