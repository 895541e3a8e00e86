package check

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpudra/gpudra/deviceclasses"
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
