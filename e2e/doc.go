// Package e2e runs breakwater's commands end to end, as a user or cron
// does: whole crawls of local demo sites, resumes, kills of a real
// process, full disks, fleets on a real redis-server, and checks of the
// repository itself (repo_test.go). Its tests only; it exports nothing.
package e2e
