// Command composeimage reads `docker compose config --format json` on
// standard input and prints how the named service gets its image: "build"
// when it is built from this repository, else its image name. It serves
// scripts/compose-smoke.sh, which swaps in locally built images.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: composeimage SERVICE < compose.json")
		os.Exit(2)
	}
	var cfg struct {
		Services map[string]struct {
			Image string          `json:"image"`
			Build json.RawMessage `json:"build"`
		} `json:"services"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, "composeimage:", err)
		os.Exit(1)
	}
	svc, ok := cfg.Services[os.Args[1]]
	switch {
	case !ok:
		fmt.Fprintln(os.Stderr, "composeimage: no service", os.Args[1])
		os.Exit(1)
	case len(svc.Build) > 0 && string(svc.Build) != "null":
		fmt.Println("build")
	default:
		fmt.Println(svc.Image)
	}
}
