package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"breakwater/demosite"
)

func main() {
	hosts, _ := strconv.Atoi(os.Args[1])
	pages, _ := strconv.Atoi(os.Args[2])
	site, err := demosite.Start(demosite.BenchSpecs(hosts, pages, false, 0), demosite.SiteOptions{Seed: 1})
	if err != nil {
		panic(err)
	}
	os.WriteFile(os.Args[3], []byte(strings.Join(site.Roots(), "\n")+"\n"), 0o644)
	fmt.Println("ready")
	select {}
}
