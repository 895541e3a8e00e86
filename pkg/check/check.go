package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/pkg/simulate"
)

// Options configure Run.
type Options struct {
	// Inputs are the decoded manifests (LoadPaths, LoadFS).
	Inputs *Inputs
	// Profile, if set, adds the ResourceSlices gpudra publishes on Nodes
	// nodes of this fake profile (ProfileInventory). Without ResourceSlices
	// in the inputs, DefaultProfile is used.
	Profile    string
	Nodes      int
	DriverName string
	// KubernetesVersion selects the feature set (KubernetesVersions).
	KubernetesVersion string
	// Sequential allocates claims one after the other, each seeing what
	// the earlier ones hold; otherwise each is allocated on an empty
	// inventory.
	Sequential bool
	// BuiltinClasses adds gpudra's shipped DeviceClasses that the inputs do
	// not define themselves.
	BuiltinClasses bool
	// ListLimit: matching devices are listed by name when at most this
	// many (default 64); otherwise only counted.
	ListLimit int
	// Slices, if set, is used as the inventory as is (tests, benchmarks).
	Slices []*resourceapi.ResourceSlice
	// AllocateTimeout bounds one allocator call on one node, as the
	// scheduler's DRASchedulerFilterTimeout does (default 10s).
	AllocateTimeout time.Duration
}

// DefaultProfile is the inventory when the inputs hold no ResourceSlices.
const DefaultProfile = "dgx-h100"

// DefaultDriverName is gpudra's default driver name.
const DefaultDriverName = "gpu.gpudra.io"

// Exit statuses.
const (
	ExitClean    = 0
	ExitFindings = 1
	ExitInput    = 2
)

// runner holds one check's state.
type runner struct {
	ctx      context.Context
	opts     Options
	feats    versionFeatures
	report   *Report
	inv      *inventory
	compiler *compiler
	celCache *cel.Cache
	// evaluation results by expression
	evals   map[string]*evalResult
	classes map[string]*classEval
	used    map[string]bool // class names claims and templates use
	seen    map[string]bool // findings already reported
	// unusedClass is set while checking a class that no claim uses, when
	// the inputs have claims (a check of classes alone checks them all).
	unusedClass bool
	lister      classLister
	byNode      map[string][]int // device indexes per node ("" = not node-local)
	// sequential allocation state
	allocated map[structured.DeviceID]string // device → claim holding it
	state     structured.AllocatedState
}

type evalResult struct {
	match []bool
	errs  map[int]error
}

type classEval struct {
	obj       *resourceapi.DeviceClass
	info      *ClassInfo
	source    Source
	selectors []*selector
	broken    bool   // a selector does not compile
	match     []bool // all selectors
}

// Run checks the inputs. It returns an *InputError when they cannot be
// used; everything else is in the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = DefaultKubernetesVersion
	}
	if opts.DriverName == "" {
		opts.DriverName = DefaultDriverName
	}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.ListLimit == 0 {
		opts.ListLimit = 64
	}
	if opts.AllocateTimeout == 0 {
		opts.AllocateTimeout = 10 * time.Second
	}
	feats, err := featuresFor(opts.KubernetesVersion)
	if err != nil {
		return nil, &InputError{Msg: err.Error()}
	}
	in := opts.Inputs
	if in == nil {
		in = &Inputs{}
	}
	if in.empty() && opts.Slices == nil {
		return nil, inputErrorf("nothing to check: give YAML files or directories with DeviceClasses, ResourceClaimTemplates, ResourceClaims, Pods or ResourceSlices")
	}
	r := &runner{
		ctx: ctx, opts: opts, feats: feats,
		report: &Report{
			KubernetesVersion: strings.TrimPrefix(opts.KubernetesVersion, "v"),
			Sequential:        opts.Sequential,
			Ignored:           in.Ignored,
			Findings:          append([]Finding(nil), in.Strict...),
		},
		compiler: newCompiler(feats.cel),
		celCache: cel.NewCache(1000, feats.cel),
		evals:    map[string]*evalResult{},
		classes:  map[string]*classEval{},
		seen:     map[string]bool{},
	}
	if err := r.loadInventory(in); err != nil {
		return nil, err
	}
	r.used = referencedClasses(in)
	classes := in.Classes
	if opts.BuiltinClasses {
		builtin, err := builtinClasses(opts.DriverName)
		if err != nil {
			return nil, err
		}
		defined := map[string]bool{}
		for _, c := range classes {
			defined[c.Obj.(*resourceapi.DeviceClass).Name] = true
		}
		for _, c := range builtin {
			name := c.Obj.(*resourceapi.DeviceClass).Name
			if !defined[name] && r.used[name] {
				classes = append(classes, c)
			}
		}
	}
	r.checkClasses(classes)
	units := r.buildUnits(in)
	for _, u := range units {
		r.allocate(u)
	}
	for _, u := range units {
		if u.pod != "" {
			r.report.Pods = append(r.report.Pods, r.podInfo(u))
		}
	}
	r.finish()
	return r.report, nil
}

// referencedClasses are the DeviceClass names the claims and templates use.
func referencedClasses(in *Inputs) map[string]bool {
	used := map[string]bool{}
	add := func(spec *resourceapi.ResourceClaimSpec) {
		for _, r := range spec.Devices.Requests {
			if r.Exactly != nil {
				used[r.Exactly.DeviceClassName] = true
			}
			for _, s := range r.FirstAvailable {
				used[s.DeviceClassName] = true
			}
		}
	}
	for _, o := range in.Claims {
		add(&o.Obj.(*resourceapi.ResourceClaim).Spec)
	}
	for _, o := range in.Templates {
		add(&o.Obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
	}
	return used
}

// builtinClasses are the DeviceClasses shipped in deviceclasses/, for a
// driver name as the Helm chart renders them: every "gpu.gpudra.io" (class
// names, selectors, attribute domains) becomes the driver name.
func builtinClasses(driverName string) ([]Object, error) {
	sub, err := fs.Sub(deviceclasses.FS, ".")
	if err != nil {
		return nil, err
	}
	files, err := fs.Glob(sub, "*.yaml")
	if err != nil {
		return nil, err
	}
	in := &Inputs{}
	for _, f := range files {
		data, err := fs.ReadFile(sub, f)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte(DefaultDriverName), []byte(driverName))
		if err := in.Add("(built in) deviceclasses/"+f, data); err != nil {
			return nil, err
		}
	}
	return in.Classes, nil
}

func (r *runner) loadInventory(in *Inputs) error {
	var all []*resourceapi.ResourceSlice
	var sources []string
	if r.opts.Slices != nil {
		all = append(all, r.opts.Slices...)
		sources = append(sources, "ResourceSlices given by the caller")
	}
	for _, o := range in.Slices {
		all = append(all, o.Obj.(*resourceapi.ResourceSlice))
	}
	if len(in.Slices) > 0 {
		sources = append(sources, fmt.Sprintf("%d ResourceSlice(s) from the input files", len(in.Slices)))
	}
	profile := r.opts.Profile
	if profile == "" && len(all) == 0 {
		profile = DefaultProfile
	}
	if profile != "" {
		slices, err := ProfileInventory(r.ctx, profile, r.opts.Nodes, r.opts.DriverName)
		if err != nil {
			return &InputError{Msg: err.Error()}
		}
		all = append(all, slices...)
		sources = append(sources, fmt.Sprintf("profile %s × %d node(s) through gpudra's slice builder, driver %s", profile, r.opts.Nodes, r.opts.DriverName))
	}
	r.inv = newInventory(all)
	r.byNode = map[string][]int{}
	for i, d := range r.inv.devices {
		r.byNode[d.node] = append(r.byNode[d.node], i)
	}
	r.resetState()
	r.report.Inventory = InventoryInfo{
		Source:  strings.Join(sources, "; "),
		Drivers: sortedKeys(r.inv.drivers),
		Nodes:   len(r.inv.nodes),
		Slices:  len(all),
		Devices: len(r.inv.devices),
	}
	if len(r.inv.devices) == 0 {
		r.addFinding(Finding{Kind: FindingEmptyInventory, Message: "the inventory holds no devices: nothing can match or be allocated"})
	}
	return nil
}

func (r *runner) resetState() {
	r.allocated = map[structured.DeviceID]string{}
	r.state = structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

// inventoryDependent findings say that something does not fit this
// inventory. For a DeviceClass no claim uses (say, a MIG profile of a
// GPU model the inventory lacks) they are notes: the scheduler never
// evaluates that class here.
var inventoryDependent = map[FindingKind]bool{
	FindingUnknownAttribute: true, FindingCapacityAsAttribute: true, FindingAttributeAsCapacity: true,
	FindingUnknownCapacity: true, FindingUnknownDriver: true, FindingRuntimeError: true,
	FindingClassMatchesNothing: true, FindingTypeMismatch: false,
}

func (r *runner) addFinding(f Finding) {
	if f.Severity == "" {
		f.Severity = SeverityError
		if r.unusedClass && inventoryDependent[f.Kind] {
			f.Severity = SeverityNote
			f.Message += " (no claim in the inputs uses this class)"
		}
	}
	// A template used by several pods is checked once per pod; say it once.
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%s\x00%s\x00%s", f.Kind, f.Source.File, f.Source.Document, f.Object, f.Field, f.Message)
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	r.report.Findings = append(r.report.Findings, f)
}

// ---- selectors ----

// addSelector compiles one expression, checks it against the API server's
// limits and the inventory, and evaluates it on every device.
func (r *runner) addSelector(src Source, object, field, expr string) *selector {
	r.report.Stats.Expressions++
	src.Line = src.lineOf(expr)
	r.report.Selectors = append(r.report.Selectors, SelectorInfo{Source: src, Object: object, Field: field, Expression: expr})
	// The report's slice may grow later; the selector keeps an index.
	s := &selector{source: src, infoIndex: len(r.report.Selectors) - 1}
	info := &r.report.Selectors[s.infoIndex]
	at := Finding{Source: src, Object: object, Field: field, Expression: expr}
	if len(expr) > resourceapi.CELSelectorExpressionMaxLength {
		info.Error = fmt.Sprintf("longer than %d characters", resourceapi.CELSelectorExpressionMaxLength)
		f := at
		f.Kind, f.Message = FindingTooLong, fmt.Sprintf("the expression is %d characters long; the API server accepts at most %d", len(expr), resourceapi.CELSelectorExpressionMaxLength)
		r.addFinding(f)
		return s
	}
	s.result = r.compiler.compile(expr)
	if s.result.Error != nil {
		info.Error = s.result.Error.Detail
		f := at
		f.Kind, f.Message = FindingCompile, s.result.Error.Detail
		f.Hint = compileHint(s.result.Error.Detail)
		r.addFinding(f)
		return s
	}
	info.Type = s.result.OutputType.String()
	info.Cost = s.result.MaxCost
	if s.result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		f := at
		f.Kind = FindingCostLimit
		f.Message = fmt.Sprintf("too complex: estimated worst-case cost %d exceeds the limit of %d", s.result.MaxCost, resourceapi.CELSelectorExpressionMaxCost)
		f.Hint = "the API server rejects this object; avoid comprehensions over attributes or long string operations"
		r.addFinding(f)
		return s
	}
	s.ok = true
	r.compiler.analyze(s)
	r.checkRefs(s, at)
	return s
}

func compileHint(detail string) string {
	switch {
	case strings.Contains(detail, "undeclared reference"):
		return "a selector sees only `device` (device.driver, device.attributes[domain].name, device.capacity[domain].name); strings are quoted"
	case strings.Contains(detail, "found no matching overload"):
		return "check the operand types: versions compare with semver('1.2.3'), quantities with quantity('40Gi') and compareTo"
	case strings.Contains(detail, "must evaluate to bool"):
		return "a selector must be a boolean expression"
	}
	return ""
}

// checkRefs reports the attributes, capacities and drivers the expression
// names that the inventory does not have.
func (r *runner) checkRefs(s *selector, at Finding) {
	inv := r.inv
	if len(inv.devices) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, ref := range s.refs {
		key := ref.what + "\x00" + ref.domain + "\x00" + ref.name
		if seen[key] {
			continue
		}
		seen[key] = true
		f := at
		f.Caret = caret(s, ref.id)
		switch ref.what {
		case "driver":
			if !inv.drivers[ref.name] {
				f.Kind = FindingUnknownDriver
				f.Message = fmt.Sprintf("no ResourceSlice in the inventory carries driver %q (drivers: %s)", ref.name, strings.Join(sortedKeys(inv.drivers), ", "))
				f.Hint = suggest(ref.name, sortedKeys(inv.drivers), "did you mean %q? ") + "the driver name is the one the plugin runs with (--driver-name)"
				r.addFinding(f)
			}
		case "attributes":
			names, known := inv.attrs[ref.domain]
			if !known && !inv.drivers[ref.domain] {
				f.Kind = FindingUnknownDriver
				f.Message = fmt.Sprintf("device.attributes['%s']: no device in the inventory has attributes in domain %q (domains: %s)", ref.domain, ref.domain, strings.Join(sortedKeys(inv.attrs), ", "))
				f.Hint = suggest(ref.domain, sortedKeys(inv.attrs), "did you mean %q? ") + "unqualified attributes live in the driver's domain, the driver name"
				r.addFinding(f)
				continue
			}
			if typ, ok := names[ref.name]; ok {
				r.checkComparison(f, ref, typ)
				continue
			}
			if _, ok := inv.caps[ref.domain][ref.name]; ok {
				f.Kind = FindingCapacityAsAttribute
				f.Message = fmt.Sprintf("%s is a capacity, not an attribute: device.attributes['%s'].%s does not exist on any device", ref.name, ref.domain, ref.name)
				f.Hint = fmt.Sprintf("use device.capacity['%s'].%s, a quantity: device.capacity['%s'].%s.compareTo(quantity('40Gi')) >= 0", ref.domain, ref.name, ref.domain, ref.name)
				r.addFinding(f)
				continue
			}
			f.Kind = FindingUnknownAttribute
			f.Message = fmt.Sprintf("no device in the inventory publishes attribute %s/%s", ref.domain, ref.name)
			f.Hint = suggest(ref.name, sortedKeys(names), "did you mean %q? ") + "published in " + ref.domain + ": " + strings.Join(sortedKeys(names), ", ")
			if !ref.testOnly {
				f.Hint += "; on devices without it the selector fails with \"no such key\""
			}
			r.addFinding(f)
		case "capacity":
			if _, ok := inv.caps[ref.domain][ref.name]; ok {
				continue
			}
			if _, ok := inv.attrs[ref.domain][ref.name]; ok {
				f.Kind = FindingAttributeAsCapacity
				f.Message = fmt.Sprintf("%s is an attribute, not a capacity: device.capacity['%s'].%s does not exist on any device", ref.name, ref.domain, ref.name)
				f.Hint = fmt.Sprintf("use device.attributes['%s'].%s", ref.domain, ref.name)
				r.addFinding(f)
				continue
			}
			if _, ok := inv.caps[ref.domain]; !ok && !inv.drivers[ref.domain] {
				f.Kind = FindingUnknownDriver
				f.Message = fmt.Sprintf("device.capacity['%s']: no device in the inventory has capacity in domain %q (domains: %s)", ref.domain, ref.domain, strings.Join(sortedKeys(inv.caps), ", "))
				f.Hint = suggest(ref.domain, sortedKeys(inv.caps), "did you mean %q?")
				r.addFinding(f)
				continue
			}
			f.Kind = FindingUnknownCapacity
			f.Message = fmt.Sprintf("no device in the inventory has capacity %s/%s", ref.domain, ref.name)
			f.Hint = suggest(ref.name, sortedKeys(inv.caps[ref.domain]), "did you mean %q? ") + "capacities in " + ref.domain + ": " + strings.Join(sortedKeys(inv.caps[ref.domain]), ", ")
			r.addFinding(f)
		}
	}
}

// checkComparison reports an attribute compared with a literal of another
// type: `==` then silently never matches, `<` fails at run time.
func (r *runner) checkComparison(f Finding, ref celRef, typ string) {
	if ref.compared == nil {
		return
	}
	lit := celTypeName(ref.compared)
	if lit == "" || lit == typ || typ == "list" {
		return
	}
	f.Kind = FindingTypeMismatch
	f.Message = fmt.Sprintf("%s/%s is a %s but is compared (%s) with the %s %s", ref.domain, ref.name, typ, ref.cmpOp, lit, ref.cmpLit)
	if ref.cmpOp == "==" || ref.cmpOp == "!=" {
		f.Message += ": values of different types are never equal, so this comparison is constant"
	} else {
		f.Message += ": evaluation fails with \"no such overload\" on every device"
	}
	switch typ {
	case "version":
		v := strings.Trim(ref.cmpLit, "'\"")
		f.Hint = fmt.Sprintf("compare versions with semver(): device.attributes['%s'].%s.compareTo(semver(%s)) >= 0, or .isGreaterThan(semver(...)); a version has three parts (%s)",
			ref.domain, ref.name, quoteSemver(v), quoteSemver(v))
	case "int":
		f.Hint = "compare with an integer literal, without quotes"
	case "bool":
		f.Hint = "compare with true or false, without quotes"
	case "string":
		f.Hint = "compare with a quoted string"
	}
	r.addFinding(f)
}

func quoteSemver(v string) string {
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	return "'" + strings.Join(parts, ".") + "'"
}

// suggest returns format with the closest candidate, if one is close.
func suggest(name string, candidates []string, format string) string {
	best, bestD := "", 4
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d < bestD && d <= max(1, len(name)/3) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(format, best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// evaluate runs a compiled selector on every device in scope (all when
// scope is nil; for a request, the devices its class matches, as the
// scheduler does); devices whose relevant values equal those of an
// earlier device share its result. scopeKey names the scope for caching.
func (r *runner) evaluate(s *selector, scope []bool, scopeKey string) *evalResult {
	cacheKey := s.result.Expression + "\x00" + scopeKey
	if res, ok := r.evals[cacheKey]; ok {
		return res
	}
	res := &evalResult{match: make([]bool, len(r.inv.devices)), errs: map[int]error{}}
	type outcome struct {
		ok  bool
		err error
	}
	memo := map[string]outcome{}
	for i, d := range r.inv.devices {
		if scope != nil && !scope[i] {
			continue
		}
		key := ""
		if !s.dynamic {
			key = d.evalKey(s)
			if o, ok := memo[key]; ok {
				res.match[i] = o.ok
				if o.err != nil {
					res.errs[i] = o.err
				}
				r.report.Stats.CachedEvals++
				continue
			}
		}
		ok, _, err := s.result.DeviceMatches(r.ctx, d.input)
		r.report.Stats.Evaluations++
		if err != nil {
			err = cel.EnhanceRuntimeError(err)
			ok = false
			res.errs[i] = err
		}
		res.match[i] = ok
		if !s.dynamic {
			memo[key] = outcome{ok, err}
		}
	}
	r.evals[cacheKey] = res
	return res
}

// reportRuntimeErrors reports, per distinct message, the devices (among
// those in scope) on which a selector failed: the scheduler stops
// scheduling a pod when that happens.
func (r *runner) reportRuntimeErrors(s *selector, res *evalResult, scope []bool, object, field, where string) {
	if len(res.errs) == 0 {
		return
	}
	byMsg := map[string][]int{}
	for i, err := range res.errs {
		if scope != nil && !scope[i] {
			continue
		}
		byMsg[err.Error()] = append(byMsg[err.Error()], i)
	}
	info := &r.report.Selectors[s.infoIndex]
	for _, msg := range sortedKeys(byMsg) {
		idx := byMsg[msg]
		sort.Ints(idx)
		info.Errors += len(idx)
		f := Finding{Kind: FindingRuntimeError, Source: s.source, Object: object, Field: field, Expression: s.result.Expression}
		f.Message = fmt.Sprintf("evaluation fails on %d device(s)%s: %s", len(idx), where, msg)
		for _, i := range idx[:min(3, len(idx))] {
			f.Devices = append(f.Devices, r.inv.devices[i].label())
		}
		f.Hint = runtimeHint(msg, s, r.inv.devices[idx[0]])
		r.addFinding(f)
	}
}

var noSuchKey = regexp.MustCompile(`no such key: ([^ .]+)`)

func runtimeHint(msg string, s *selector, d *device) string {
	switch {
	case strings.Contains(msg, "no such key"):
		what, domain, name := "attributes", "<domain>", "<name>"
		if m := noSuchKey.FindStringSubmatch(msg); m != nil {
			name = m[1]
			for _, ref := range s.refs {
				if ref.name == name && ref.what != "driver" {
					what, domain = ref.what, ref.domain
					break
				}
			}
		}
		return fmt.Sprintf("%s has no %s %s, and the scheduler stops with this error instead of skipping the device: guard the access with has(device.%s['%s'].%s) && …, or use device.%s['%s'].?%s.orValue(<default>), or select the kind of device first",
			d.label(), strings.TrimSuffix(what, "s"), name, what, domain, name, what, domain, name)
	case strings.Contains(msg, "no such overload"):
		var types []string
		for _, ref := range s.refs {
			if ref.what != "attributes" {
				continue
			}
			if a, ok := d.attribute(ref.domain, ref.name); ok {
				types = append(types, fmt.Sprintf("%s is a %s (%s)", ref.name, attributeTypeName(a), attrString(a)))
			}
		}
		h := "an operand has another type than the expression assumes"
		if len(types) > 0 {
			h += ": on " + d.label() + " " + strings.Join(types, ", ")
		}
		return h + "; versions compare with semver('9.0.0'), quantities with quantity('40Gi')"
	}
	return ""
}

// ---- classes ----

func (r *runner) checkClasses(objs []Object) {
	for _, o := range objs {
		dc := o.Obj.(*resourceapi.DeviceClass)
		r.report.Classes = append(r.report.Classes, ClassInfo{Name: dc.Name, Source: o.Source})
		ce := &classEval{obj: dc, source: o.Source, match: make([]bool, len(r.inv.devices))}
		for i := range ce.match {
			ce.match[i] = true
		}
		object := "DeviceClass " + dc.Name
		r.unusedClass = len(r.used) > 0 && !r.used[dc.Name]
		for i, sel := range dc.Spec.Selectors {
			field := fmt.Sprintf("spec.selectors[%d].cel.expression", i)
			if sel.CEL == nil {
				r.addFinding(Finding{Kind: FindingInvalid, Source: o.Source, Object: object, Field: fmt.Sprintf("spec.selectors[%d].cel", i), Message: "a selector needs cel"})
				ce.broken = true
				continue
			}
			s := r.addSelector(o.Source, object, field, sel.CEL.Expression)
			ce.selectors = append(ce.selectors, s)
			if !s.ok {
				ce.broken = true
				continue
			}
			res := r.evaluate(s, nil, "")
			r.recordCounts(s, res, nil)
			r.reportRuntimeErrors(s, res, nil, object, field, "")
			for j := range ce.match {
				ce.match[j] = ce.match[j] && res.match[j]
			}
		}
		if ce.broken {
			for j := range ce.match {
				ce.match[j] = false
			}
		}
		if _, dup := r.classes[dc.Name]; dup {
			r.addFinding(Finding{Kind: FindingInvalid, Source: o.Source, Object: object, Message: "DeviceClass defined twice; the later one is used"})
		}
		r.classes[dc.Name] = ce
		r.report.Classes[len(r.report.Classes)-1].Matches = r.matches(ce.match)
		if !ce.broken && len(r.inv.devices) > 0 && r.report.Classes[len(r.report.Classes)-1].Matches.Count == 0 {
			r.addFinding(Finding{Kind: FindingClassMatchesNothing, Source: o.Source, Object: object,
				Message: fmt.Sprintf("DeviceClass %s matches none of the %d devices in the inventory", dc.Name, len(r.inv.devices)),
				Hint:    r.classHint(ce)})
		}
	}
	r.unusedClass = false
	r.lister = classLister{classes: r.classes}
}

func (r *runner) classHint(ce *classEval) string {
	var parts []string
	for i, s := range ce.selectors {
		if !s.ok {
			continue
		}
		res := r.evaluate(s, nil, "")
		n := countTrue(res.match)
		parts = append(parts, fmt.Sprintf("selectors[%d] matches %d", i, n))
	}
	return strings.Join(parts, ", ")
}

func (r *runner) recordCounts(s *selector, res *evalResult, scope []bool) {
	info := &r.report.Selectors[s.infoIndex]
	info.Devices, info.Matches = 0, 0
	for i, m := range res.match {
		if scope != nil && !scope[i] {
			continue
		}
		info.Devices++
		if m {
			info.Matches++
		}
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func (r *runner) matches(m []bool) Matches {
	var out Matches
	nodes := map[string]bool{}
	for i, ok := range m {
		if !ok {
			continue
		}
		out.Count++
		nodes[r.inv.devices[i].node] = true
	}
	out.Nodes = len(nodes)
	if out.Count <= r.opts.ListLimit {
		out.Devices = []string{}
		for i, ok := range m {
			if ok {
				out.Devices = append(out.Devices, r.inv.devices[i].label())
			}
		}
	}
	return out
}

// classLister serves the checked DeviceClasses to the allocator.
type classLister struct{ classes map[string]*classEval }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.classes))
	for _, name := range sortedKeys(l.classes) {
		out = append(out, l.classes[name].obj)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l.classes[name]; ok {
		return c.obj, nil
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

// ---- claims ----

// unit is what is allocated at once: one pod's claims, or one claim.
type unit struct {
	pod    string // namespace/name, "" for a lone claim
	podObj Object
	byName map[string]*claimEval // pod claim name → claim
	claims []*claimEval
}

type claimEval struct {
	info   *ClaimInfo
	idx    int // in report.Claims
	claim  *resourceapi.ResourceClaim
	object string // for findings
	field  string // "spec" or "spec.spec"
	source Source
	reqs   []*reqEval
	// invalid: the API server would reject the claim; it is not allocated.
	invalid bool
	// allocated, once done (a shared claim used by several pods)
	done bool
	node string
}

type reqEval struct {
	name      string // request or request/subrequest
	class     string
	mode      resourceapi.DeviceAllocationMode
	count     int64
	admin     bool
	tolerates []resourceapi.DeviceToleration
	missing   bool // class not defined
	broken    bool // class or selector does not compile
	classHits []bool
	match     []bool
	selCounts []int // per request selector: class matches it keeps
	selErrors int   // class matches on which a request selector fails
	sub       []*reqEval
}

func (r *runner) buildUnits(in *Inputs) []*unit {
	claimsByName := map[string]*claimEval{}
	templates := map[string]Object{}
	usedTemplates := map[string]bool{}
	var claimOrder []*claimEval
	for _, o := range in.Claims {
		c := o.Obj.(*resourceapi.ResourceClaim)
		ce := r.newClaim(c.DeepCopy(), "ResourceClaim", o.Source, "ResourceClaim "+o.Name, "spec")
		claimsByName[o.Name] = ce
		claimOrder = append(claimOrder, ce)
	}
	for _, o := range in.Templates {
		templates[o.Name] = o
	}
	type ordered struct {
		src Source
		u   *unit
	}
	var units []ordered
	usedClaims := map[*claimEval]bool{}
	for _, o := range in.Pods {
		pod := o.Obj.(*v1.Pod)
		u := &unit{pod: o.Name, podObj: o, byName: map[string]*claimEval{}}
		for i, pc := range pod.Spec.ResourceClaims {
			field := fmt.Sprintf("spec.resourceClaims[%d]", i)
			switch {
			case pc.ResourceClaimName != nil:
				name := pod.Namespace + "/" + *pc.ResourceClaimName
				ce, ok := claimsByName[name]
				if !ok {
					r.addFinding(Finding{Kind: FindingMissingClaim, Source: o.Source, Object: "Pod " + o.Name, Field: field + ".resourceClaimName",
						Message: fmt.Sprintf("ResourceClaim %s is not among the inputs; the pod would stay Pending until it exists", name),
						Hint:    "add the file that defines it"})
					continue
				}
				usedClaims[ce] = true
				u.claims = append(u.claims, ce)
				u.byName[pc.Name] = ce
			case pc.ResourceClaimTemplateName != nil:
				name := pod.Namespace + "/" + *pc.ResourceClaimTemplateName
				t, ok := templates[name]
				if !ok {
					r.addFinding(Finding{Kind: FindingMissingClaim, Source: o.Source, Object: "Pod " + o.Name, Field: field + ".resourceClaimTemplateName",
						Message: fmt.Sprintf("ResourceClaimTemplate %s is not among the inputs; the pod would stay Pending until it exists", name),
						Hint:    "add the file that defines it"})
					continue
				}
				usedTemplates[name] = true
				tmpl := t.Obj.(*resourceapi.ResourceClaimTemplate)
				claim := &resourceapi.ResourceClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-" + pc.Name},
					Spec:       *tmpl.Spec.Spec.DeepCopy(),
				}
				ce := r.newClaim(claim, "ResourceClaimTemplate "+name+" for Pod "+o.Name, t.Source, "ResourceClaimTemplate "+name, "spec.spec")
				ce.info.Pod = o.Name
				u.claims = append(u.claims, ce)
				u.byName[pc.Name] = ce
			default:
				r.addFinding(Finding{Kind: FindingInvalid, Source: o.Source, Object: "Pod " + o.Name, Field: field,
					Message: "names neither resourceClaimName nor resourceClaimTemplateName"})
			}
		}
		r.checkContainerClaims(o, pod)
		if len(u.claims) > 0 {
			units = append(units, ordered{o.Source, u})
		}
	}
	for _, ce := range claimOrder {
		if !usedClaims[ce] {
			units = append(units, ordered{ce.source, &unit{claims: []*claimEval{ce}}})
		}
	}
	for _, o := range in.Templates {
		if usedTemplates[o.Name] {
			continue
		}
		tmpl := o.Obj.(*resourceapi.ResourceClaimTemplate)
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: tmpl.Name},
			Spec:       *tmpl.Spec.Spec.DeepCopy(),
		}
		ce := r.newClaim(claim, "ResourceClaimTemplate "+o.Name, o.Source, "ResourceClaimTemplate "+o.Name, "spec.spec")
		units = append(units, ordered{o.Source, &unit{claims: []*claimEval{ce}}})
	}
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i].src, units[j].src
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Document < b.Document
	})
	out := make([]*unit, len(units))
	for i := range units {
		out[i] = units[i].u
	}
	return out
}

// podInfo says what each container of a pod would receive.
func (r *runner) podInfo(u *unit) PodInfo {
	pod := u.podObj.Obj.(*v1.Pod)
	pi := PodInfo{Name: u.pod, Source: u.podObj.Source}
	for _, ce := range u.claims {
		if a := r.report.Claims[ce.idx].Allocation; a != nil {
			pi.Node = a.Node
		} else {
			pi.Pending = true
		}
	}
	if len(u.claims) < len(pod.Spec.ResourceClaims) {
		pi.Pending = true
	}
	if pi.Pending {
		pi.Node = ""
	}
	for _, c := range pod.Spec.Containers {
		ci := ContainerInfo{Name: c.Name, Devices: []string{}}
		for _, rc := range c.Resources.Claims {
			ce, ok := u.byName[rc.Name]
			if !ok {
				continue
			}
			a := r.report.Claims[ce.idx].Allocation
			if a == nil {
				continue
			}
			for _, d := range a.Devices {
				base, _, _ := strings.Cut(d.Request, "/")
				if rc.Request == "" || rc.Request == base || rc.Request == d.Request {
					ci.Devices = append(ci.Devices, fmt.Sprintf("%s (claim %s, request %s)", d.Device, rc.Name, d.Request))
				}
			}
		}
		pi.Containers = append(pi.Containers, ci)
	}
	return pi
}

// checkContainerClaims reports containers that name a pod claim (or a
// request) that does not exist.
func (r *runner) checkContainerClaims(o Object, pod *v1.Pod) {
	names := map[string]bool{}
	for _, pc := range pod.Spec.ResourceClaims {
		names[pc.Name] = true
	}
	for i, c := range pod.Spec.Containers {
		for j, rc := range c.Resources.Claims {
			if !names[rc.Name] {
				r.addFinding(Finding{Kind: FindingInvalid, Source: o.Source, Object: "Pod " + o.Name,
					Field:   fmt.Sprintf("spec.containers[%d].resources.claims[%d].name", i, j),
					Message: fmt.Sprintf("container %s uses claim %q, which spec.resourceClaims does not define; the API server rejects the pod", c.Name, rc.Name)})
			}
		}
	}
}

func (r *runner) newClaim(claim *resourceapi.ResourceClaim, from string, src Source, object, field string) *claimEval {
	simulate.DefaultClaimSpec(&claim.Spec)
	claim.UID = types.UID("gpudra-check-" + claim.Namespace + "-" + claim.Name)
	r.report.Claims = append(r.report.Claims, ClaimInfo{Name: claim.Namespace + "/" + claim.Name, From: from, Source: src})
	ce := &claimEval{idx: len(r.report.Claims) - 1, claim: claim, object: object, field: field, source: src}
	for i, req := range claim.Spec.Devices.Requests {
		f := fmt.Sprintf("%s.devices.requests[%d]", field, i)
		var re *reqEval
		switch {
		case req.Exactly != nil && len(req.FirstAvailable) > 0:
			r.addFinding(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: f, Message: "a request sets both exactly and firstAvailable; the API server rejects the claim"})
			ce.invalid = true
			continue
		case req.Exactly != nil:
			e := req.Exactly
			re = r.newRequest(req.Name, e.DeviceClassName, e.AllocationMode, e.Count, e.AdminAccess, e.Tolerations, e.Selectors, src, object, f+".exactly")
		case len(req.FirstAvailable) > 0:
			re = &reqEval{name: req.Name}
			if !r.feats.allocator.PrioritizedList {
				r.addFinding(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: f + ".firstAvailable",
					Message: fmt.Sprintf("firstAvailable needs the DRAPrioritizedList feature, which Kubernetes %s does not enable", r.report.KubernetesVersion)})
			}
			for j, sub := range req.FirstAvailable {
				re.sub = append(re.sub, r.newRequest(req.Name+"/"+sub.Name, sub.DeviceClassName, sub.AllocationMode, sub.Count, nil, sub.Tolerations, sub.Selectors, src, object, fmt.Sprintf("%s.firstAvailable[%d]", f, j)))
			}
		default:
			r.addFinding(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: f, Message: fmt.Sprintf("request %q sets neither exactly nor firstAvailable; the API server rejects the claim", req.Name)})
			ce.invalid = true
			continue
		}
		ce.reqs = append(ce.reqs, re)
	}
	ce.invalid = ce.invalid || r.validateRequests(ce, src, object, field)
	ce.info = &r.report.Claims[ce.idx]
	for _, re := range ce.reqs {
		r.report.Claims[ce.idx].Requests = append(r.report.Claims[ce.idx].Requests, r.requestInfo(re))
	}
	return ce
}

// validateRequests checks what the API server checks on a claim and the
// allocator relies on: names, classes, modes and counts. It reports each
// problem and says whether there was one.
func (r *runner) validateRequests(ce *claimEval, src Source, object, field string) bool {
	bad := false
	report := func(f, msg string) {
		r.addFinding(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: f, Message: msg + "; the API server rejects the claim"})
		bad = true
	}
	check := func(f, name, class string, mode resourceapi.DeviceAllocationMode, count int64) {
		if name == "" {
			report(f+".name", "a request needs a name")
		}
		if class == "" {
			report(f+".deviceClassName", "deviceClassName is required")
		}
		switch mode {
		case resourceapi.DeviceAllocationModeExactCount:
			if count < 1 {
				report(f+".count", fmt.Sprintf("count must be at least 1, got %d", count))
			}
		case resourceapi.DeviceAllocationModeAll:
		default:
			report(f+".allocationMode", fmt.Sprintf("unknown allocationMode %q (ExactCount or All)", mode))
		}
	}
	names := map[string]bool{}
	reqs := ce.claim.Spec.Devices.Requests
	if len(reqs) == 0 {
		report(field+".devices.requests", "a claim needs at least one request")
	}
	for i, req := range reqs {
		f := fmt.Sprintf("%s.devices.requests[%d]", field, i)
		if names[req.Name] {
			report(f+".name", fmt.Sprintf("duplicate request name %q", req.Name))
		}
		names[req.Name] = true
		if req.Exactly != nil {
			e := req.Exactly
			check(f+".exactly", req.Name, e.DeviceClassName, e.AllocationMode, e.Count)
		}
		subs := map[string]bool{}
		for j, sub := range req.FirstAvailable {
			sf := fmt.Sprintf("%s.firstAvailable[%d]", f, j)
			if subs[sub.Name] {
				report(sf+".name", fmt.Sprintf("duplicate subrequest name %q", sub.Name))
			}
			subs[sub.Name] = true
			check(sf, sub.Name, sub.DeviceClassName, sub.AllocationMode, sub.Count)
		}
	}
	for i, c := range ce.claim.Spec.Devices.Constraints {
		for _, n := range c.Requests {
			base, _, _ := strings.Cut(n, "/")
			if !names[base] {
				report(fmt.Sprintf("%s.devices.constraints[%d].requests", field, i), fmt.Sprintf("constraint names request %q, which the claim does not have", n))
			}
		}
		if (c.MatchAttribute == nil) == (c.DistinctAttribute == nil) {
			report(fmt.Sprintf("%s.devices.constraints[%d]", field, i), "a constraint needs exactly one of matchAttribute and distinctAttribute")
		}
	}
	return bad
}

func (r *runner) requestInfo(re *reqEval) RequestInfo {
	ri := RequestInfo{Name: re.name, Class: re.class, Mode: string(re.mode), Count: re.count}
	if re.sub != nil {
		for _, s := range re.sub {
			ri.Sub = append(ri.Sub, r.requestInfo(s))
		}
		return ri
	}
	if re.mode == resourceapi.DeviceAllocationModeAll {
		ri.Count = 0
	}
	ri.Matches = r.matches(re.match)
	return ri
}

func (r *runner) newRequest(name, class string, mode resourceapi.DeviceAllocationMode, count int64, admin *bool, tol []resourceapi.DeviceToleration,
	sels []resourceapi.DeviceSelector, src Source, object, field string) *reqEval {
	re := &reqEval{name: name, class: class, mode: mode, count: count, admin: admin != nil && *admin, tolerates: tol,
		match: make([]bool, len(r.inv.devices))}
	ce, ok := r.classes[class]
	switch {
	case !ok:
		re.missing = true
		r.addFinding(Finding{Kind: FindingUnknownClass, Source: src, Object: object, Field: field + ".deviceClassName",
			Message: fmt.Sprintf("DeviceClass %q is not defined in the inputs (nor built in): the claim cannot be allocated", class),
			Hint:    suggest(class, sortedKeys(r.classes), "did you mean %q? ") + "classes: " + strings.Join(sortedKeys(r.classes), ", ")})
	case ce.broken:
		re.broken = true
	default:
		copy(re.match, ce.match)
	}
	re.classHits = append([]bool(nil), re.match...)
	for i, sel := range sels {
		f := fmt.Sprintf("%s.selectors[%d].cel.expression", field, i)
		if sel.CEL == nil {
			r.addFinding(Finding{Kind: FindingInvalid, Source: src, Object: object, Field: fmt.Sprintf("%s.selectors[%d].cel", field, i), Message: "a selector needs cel"})
			re.broken = true
			continue
		}
		s := r.addSelector(src, object, f, sel.CEL.Expression)
		if !s.ok {
			re.broken = true
			continue
		}
		res := r.evaluate(s, re.classHits, class)
		r.recordCounts(s, res, re.classHits)
		r.reportRuntimeErrors(s, res, re.classHits, object, f, " that DeviceClass "+class+" matches")
		kept := 0
		for j := range re.match {
			if re.classHits[j] && res.match[j] {
				kept++
			}
			if _, failed := res.errs[j]; failed && re.classHits[j] {
				re.selErrors++
			}
			re.match[j] = re.match[j] && res.match[j]
		}
		re.selCounts = append(re.selCounts, kept)
	}
	if re.broken {
		for j := range re.match {
			re.match[j] = false
		}
	}
	return re
}

// ---- allocation ----

func (r *runner) allocate(u *unit) {
	var todo []*claimEval
	pinned := ""
	for _, ce := range u.claims {
		if ce.done {
			pinned = ce.node
			continue
		}
		todo = append(todo, ce)
	}
	if len(todo) == 0 {
		return
	}
	if !r.opts.Sequential {
		r.resetState()
	}
	claims := make([]*resourceapi.ResourceClaim, len(todo))
	for i, ce := range todo {
		claims[i] = ce.claim
		if ce.invalid {
			for _, ce := range todo {
				r.unsatisfiable(ce, "the API server rejects claim "+claims[i].Namespace+"/"+claims[i].Name+" (see the findings): it is never allocated")
			}
			return
		}
	}
	for _, ce := range todo {
		for _, re := range ce.reqs {
			if re.missing || re.broken || anySub(re, func(s *reqEval) bool { return s.missing || s.broken }) {
				r.unsatisfiable(ce, "a request's DeviceClass or selectors are unusable (see the findings above): the scheduler cannot allocate this claim")
				return
			}
		}
	}
	state := structured.AllocatedState{
		AllocatedDevices:         r.state.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: r.state.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       r.state.AggregatedCapacity.Clone(),
	}
	alloc, err := structured.NewAllocator(r.ctx, r.feats.allocator, state, r.lister, r.inv.slices, r.celCache)
	if err != nil {
		for _, ce := range todo {
			r.unsatisfiable(ce, "the allocator cannot be created: "+err.Error())
		}
		return
	}
	for _, node := range r.inv.nodes {
		if pinned != "" && node.Name != pinned {
			continue
		}
		if !r.mayFit(todo, node.Name) {
			continue
		}
		r.report.Stats.AllocateRuns++
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.AllocateTimeout)
		results, err := safeAllocate(ctx, alloc, node, claims)
		cancel()
		if err != nil && errors.Is(err, context.DeadlineExceeded) && r.ctx.Err() == nil {
			msg := fmt.Sprintf("the allocator did not finish within %s on node %s; the scheduler gives up likewise (DRASchedulerFilterTimeout, 10s by default): too many combinations to try (large counts with constraints?)", r.opts.AllocateTimeout, node.Name)
			for _, ce := range todo {
				r.unsatisfiable(ce, msg)
				f := Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg)}
				f.Source.Line = ce.source.lineOf("devices:")
				r.addFinding(f)
			}
			return
		}
		if err != nil {
			msg := "the scheduler stops with an error on node " + node.Name + ": " + cel.EnhanceRuntimeError(err).Error()
			for _, ce := range todo {
				r.unsatisfiable(ce, msg)
				f := Finding{Kind: FindingUnsatisfiable, Source: ce.source, Object: ce.object, Message: fmt.Sprintf("claim %s: %s", ce.info.Name, msg),
					Hint: "a selector that fails on a device aborts scheduling; see the runtime-error findings"}
				f.Source.Line = ce.source.lineOf("devices:")
				r.addFinding(f)
			}
			return
		}
		if len(results) == len(todo) {
			for i, ce := range todo {
				r.record(ce, node.Name, results[i])
			}
			return
		}
	}
	r.explain(u, todo, pinned)
}

// safeAllocate turns a panic of the allocator (on input the API server
// would have rejected) into an error: gpudra check reports, never crashes.
func safeAllocate(ctx context.Context, alloc structured.Allocator, node *v1.Node, claims []*resourceapi.ResourceClaim) (results []resourceapi.AllocationResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the allocator failed on this input (it panicked: %v); the API server probably rejects one of these objects", p)
		}
	}()
	return alloc.Allocate(ctx, node, claims)
}

func anySub(re *reqEval, f func(*reqEval) bool) bool {
	for _, s := range re.sub {
		if f(s) {
			return true
		}
	}
	return false
}

func (r *runner) record(ce *claimEval, node string, res resourceapi.AllocationResult) {
	a := &Allocation{Node: node}
	for _, d := range res.Devices.Results {
		a.Devices = append(a.Devices, AllocatedDevice{Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device})
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.AdminAccess != nil && *d.AdminAccess {
			continue
		}
		switch {
		case d.ShareID != nil:
			r.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
			if d.ConsumedCapacity != nil {
				r.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
			}
		default:
			r.state.AllocatedDevices.Insert(id)
		}
		r.allocated[id] = ce.info.Name
	}
	ce.done, ce.node = true, node
	r.report.Claims[ce.idx].Allocation = a
}

func (r *runner) unsatisfiable(ce *claimEval, reasons ...string) {
	ci := &r.report.Claims[ce.idx]
	ci.Unsatisfiable = append(ci.Unsatisfiable, reasons...)
	ce.done = true
}

// free says whether device i can still be allocated (sequential mode).
func (r *runner) free(i int) bool {
	_, held := r.allocated[r.inv.devices[i].id]
	return !held
}

// mayFit is a necessary condition for the unit to fit on the node: every
// request has enough matching, free devices there. It spares the
// allocator nodes that cannot work.
func (r *runner) mayFit(claims []*claimEval, node string) bool {
	for _, ce := range claims {
		for _, re := range ce.reqs {
			if !r.requestMayFit(re, node) {
				return false
			}
		}
	}
	return true
}

func (r *runner) requestMayFit(re *reqEval, node string) bool {
	if re.sub != nil {
		for _, s := range re.sub {
			if r.requestMayFit(s, node) {
				return true
			}
		}
		return false
	}
	n := r.countOn(re.match, node, !re.admin)
	if re.mode == resourceapi.DeviceAllocationModeAll {
		return n > 0
	}
	return int64(n) >= re.count
}

// countOn counts matching devices on a node (and those reachable from
// every node); onlyFree skips devices earlier claims hold.
func (r *runner) countOn(match []bool, node string, onlyFree bool) int {
	n := 0
	for _, list := range [][]int{r.byNode[node], r.byNode[""]} {
		for _, i := range list {
			if match[i] && (!onlyFree || r.free(i)) {
				n++
			}
		}
	}
	return n
}
