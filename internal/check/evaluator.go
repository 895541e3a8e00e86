/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package check

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// evaluator owns what the inputs' CEL selectors make of the inventory:
// the DeviceClasses as evaluated on first use (classes), the compiled
// selectors and their results on every device, by expression (evals),
// and the counts and hints the report gives for them. It reads the
// inventory and the known classes; it allocates nothing, so its results
// hold whatever the claims allocated so far.
type evaluator struct {
	ctx      context.Context
	opts     Options
	inv      *inventory
	report   *Report
	findings *findingLog
	// known are the DeviceClasses the cluster would have, builtin those
	// of them that come from gpudra (the runner's, loadClasses).
	known    map[string]scheduler.Object
	builtin  map[string]bool
	compiler *compiler
	// evals are the evaluation results by expression.
	evals map[string]*evalResult
	// classes are the known classes evaluated so far (on first use).
	classes map[string]*classEval
}

func newEvaluator(ctx context.Context, opts Options, feats scheduler.Features, inv *inventory, report *Report, findings *findingLog, known map[string]scheduler.Object, builtin map[string]bool) *evaluator {
	return &evaluator{
		ctx: ctx, opts: opts, inv: inv, report: report, findings: findings,
		known: known, builtin: builtin,
		compiler: newCompiler(feats.CEL),
		evals:    map[string]*evalResult{},
		classes:  map[string]*classEval{},
	}
}

type evalResult struct {
	match []bool
	errs  map[int]error
}

type classEval struct {
	obj       *resourceapi.DeviceClass
	source    scheduler.Source
	selectors []*selector
	broken    bool   // a selector does not compile
	match     []bool // all selectors
}
