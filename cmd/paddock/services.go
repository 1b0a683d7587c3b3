//go:build !paddock_cli

package main

import (
	"context"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// managerServices serves the API's one wide interface from the Manager's
// services until the API's handlers declare the narrow ones they use.
type managerServices struct {
	m *lifecycle.Manager
	*projectsService
	*runsService
	*jobsService
	*brokerService
	*changesService
	*provenanceService
	*verifierService
	*flowsService
	*reviewsService
	*queueService
	*forksService
	*bundlesService
}

// Aliases name the embedded fields apart from the methods they promote
// (lifecycle.Runs has a method Runs).
type (
	projectsService   = lifecycle.Projects
	runsService       = lifecycle.Runs
	jobsService       = lifecycle.Jobs
	brokerService     = lifecycle.Broker
	changesService    = lifecycle.Changes
	provenanceService = lifecycle.Provenance
	verifierService   = lifecycle.Verifier
	flowsService      = lifecycle.Flows
	reviewsService    = lifecycle.Reviews
	queueService      = lifecycle.Queue
	forksService      = lifecycle.Forks
	bundlesService    = lifecycle.Bundles
)

func servicesOf(m *lifecycle.Manager) *managerServices {
	return &managerServices{m, m.Projects, m.Runs, m.Jobs, m.Broker, m.Changes, m.Provenance, m.Verifier, m.Flows, m.Reviews, m.Queue, m.Forks, m.Bundles}
}

func (s *managerServices) Run(ctx context.Context, id string) (*paddock.Run, error) {
	return s.m.Run(ctx, id)
}

func (s *managerServices) Project(ctx context.Context, name string) (*paddock.Project, error) {
	return s.m.Project(ctx, name)
}

func (s *managerServices) GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error) {
	return s.m.GC(ctx, dryRun)
}
