# gpudra — build, test and demo. Every target works offline on a machine with
# Go and gcc (go-nvml needs cgo, even for the fake GPUs).

GO          ?= go
BIN         ?= bin
export CGO_ENABLED := 1
# go-nvml's header marks many NVML calls deprecated; the warnings are noise.
export CGO_CFLAGS  := -Wno-deprecated-declarations
GOTESTFLAGS ?= -count=1
# Per-package limit for make test: internal/simulate runs the real plugin through
# many failure paths and takes ~7 min on an idle 2-core machine (10+ under
# load), past go test's default 10 min; GOTESTFLAGS from .ci/run keep it.
GOTESTTIMEOUT ?= 30m
# Tools built once, outside the repository, keyed by version (hack/localcluster/build.sh).
GPUDRA_CACHE ?= $(HOME)/.cache/gpudra
HELM_VERSION ?= v3.22.0
HELM         ?= $(GPUDRA_CACHE)/helm-$(HELM_VERSION)-stamped/helm
export GPUDRA_CACHE HELM_VERSION
# The version (git describe: the tag, or the tag plus commits and hash) and
# git revision every binary, the image's tag and labels and the packaged
# chart are stamped with (hack/version.sh; VERSION=v0.1.0 and 0.1.0 are the
# same). CHART_VERSION is the source chart's appVersion: make image also
# names its image by that tag, the one `helm install deployments/helm/gpudra`
# pulls from a checkout.
override VERSION := $(shell VERSION='$(VERSION)' hack/version.sh version)
ifeq ($(VERSION),)
$(error hack/version.sh gave no version (see its message above): VERSION must be MAJOR.MINOR.PATCH[-PRERELEASE], with or without a leading v)
endif
REVISION     ?= $(shell hack/version.sh revision)
CHART_VERSION := $(shell hack/version.sh chart-version)
LDFLAGS      := -X github.com/gpudra/gpudra/internal/version.version=$(VERSION) -X github.com/gpudra/gpudra/internal/version.revision=$(REVISION)
IMAGE        ?= ghcr.io/gpudra/gpudra:$(VERSION)
RELEASE_DIR  ?= $(BIN)/release/$(VERSION)

.PHONY: all build cli cli-laptop test test-unit test-race test-busy chaos-sharing golden demo fmt fmt-check fix vet lint verify bench bench-fleet fuzz clean chart-check image image-multiarch check-arm64 e2e-local e2e-multinode e2e-kind chaos-local generate verify-generate image-name gpu-check gpu-check-bundle chart release version

all: build

## build: the binaries into ./bin, stamped with VERSION and REVISION (and bin/kubectl-gpudra, the kubectl plugin: put it on PATH for `kubectl gpudra`)
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/gpudra-kubelet-plugin ./cmd/kubelet-plugin
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/gpudra-controller ./cmd/controller
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/gpudra ./cmd/gpudra
	ln -sf gpudra $(BIN)/kubectl-gpudra

## test: unit, golden and in-process integration tests, helm lint/template, the kind config, the image writer (no cluster, no GPU)
test: test-unit chart-check
	cd hack/kind && GOWORK=off $(GO) test $(GOTESTFLAGS) ./...
	cd hack/mkimage && GOWORK=off CGO_ENABLED=0 $(GO) test $(GOTESTFLAGS) ./...

## test-unit: gofmt, go vet and every Go test, without building helm (no cluster, no GPU)
test-unit: fmt-check vet verify-generate
	$(GO) test -timeout $(GOTESTTIMEOUT) $(GOTESTFLAGS) ./...

## test-race: the packages that hold locks and goroutines under the race detector: node state, checkpoint, plugin, MPS launchers and stand-in, CDI writer, health, fake GPUs, controller, fleet, and the in-process pipeline's concurrency, crash and sharing tests (.ci/run runs it)
RACE_PACKAGES ?= ./internal/nodestate/ ./internal/checkpoint/ ./internal/plugin/ ./internal/mps/ ./internal/mpspod/ ./internal/mpsstandin/ ./internal/cdispec/ ./internal/discovery/ ./internal/nvmlfake/ ./internal/controller/... ./internal/fleet/ ./internal/nvlinkpools/ ./internal/imexstandin/ ./internal/imexready/
RACE_SIMULATE ?= ^(TestMigConcurrentPrepares|TestCrashInsideCheckpointBatch|TestSharingChaos|TestHungMPSDaemonIsReplaced|TestMPSOneDaemonPerDevice|TestMPSSurvivesRestartAndUpgrade|TestMPSDaemonKilledIsRestarted|TestTwoSharesOfOneGPUInOneClaim|TestHealthRecovers|TestSharedClaim)$$
test-race:
	$(GO) test -race $(GOTESTFLAGS) $(RACE_PACKAGES)
	$(GO) test -race $(GOTESTFLAGS) -timeout 30m -run '$(RACE_SIMULATE)' ./internal/simulate/

## test-busy: the tests whose checks depend on scheduling (republish counts, polls, timeouts, goroutine interleaving), BUSY_RUNS (10) times each while two CPU-bound processes keep the machine busy (hack/test-busy.sh; BUSY_PACKAGES and BUSY_RUN pick others)
test-busy:
	hack/test-busy.sh

## chaos-sharing: the in-process sharing chaos run, no cluster: SHARING_CHAOS_ITERATIONS (200) iterations of MPS, time-sliced and plain shares with failures injected at every sharing step, daemons killed, stopped and wiped, plugin restarts, the sharing invariants checked after each (make test runs 12)
SHARING_CHAOS_ITERATIONS ?= 200
SHARING_CHAOS_SEED ?= 1
chaos-sharing:
	bash -o pipefail -c 'GPUDRA_SHARING_CHAOS_ITERATIONS=$(SHARING_CHAOS_ITERATIONS) GPUDRA_SHARING_CHAOS_SEED=$(SHARING_CHAOS_SEED) \
		$(GO) test -count=1 -timeout 60m -run "^TestSharingChaos$$" -v ./internal/simulate/ | grep -E "^(gpudra sharing chaos|  [a-z]|--- |ok|FAIL|panic|\s+sharing_chaos_test)"'

## golden: rewrite every golden file from the current code (published slices, doc tables, gpudra check's and migrate's expectations: the tests listed in hack/golden-tests); review the diff before committing
golden:
	hack/golden.sh update

## generate: the generated code (deep-copy functions of the config API, deepcopy-gen built once into $(GPUDRA_CACHE)/tools by hack/tools.sh; the read-only NVML wrapper)
generate:
	$$(hack/tools.sh deepcopy-gen) --output-file zz_generated.deepcopy.go --go-header-file hack/boilerplate.go.txt ./pkg/api/resource/v1alpha1
	$(GO) run ./hack/readonlygen > internal/backend/readonly_generated.go

## verify-generate: fail when generated code is out of date (part of make test)
verify-generate:
	hack/verify-generate.sh

## chart-check: helm lint and helm template of deployments/helm/gpudra, its Go tests over the rendered chart, and its alert rules under promtool (helm is built into $(GPUDRA_CACHE) on first use, ~5-10 min; promtool comes from Debian's prometheus package, unpacked there, ~15 s)
chart-check: $(HELM)
	HELM=$(HELM) GOTESTFLAGS="$(GOTESTFLAGS)" hack/chart-check.sh

$(HELM):
	hack/localcluster/build.sh helm

## cli: the gpudra CLI into ./bin, with bin/kubectl-gpudra (put ./bin on PATH for `kubectl gpudra`)
cli:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/gpudra ./cmd/gpudra
	ln -sf gpudra $(BIN)/kubectl-gpudra

## cli-laptop: the gpudra CLI without cgo, for laptops (check, migrate, status, version; no inventory, gpu-check, simulate: docs/cli.md): bin/gpudra-darwin-arm64, -darwin-amd64, -linux-amd64, -linux-arm64, -windows-amd64.exe
cli-laptop:
	for p in darwin/arm64 darwin/amd64 linux/amd64 linux/arm64 windows/amd64; do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; if [ $$os = windows ]; then ext=.exe; fi; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/gpudra-$$os-$$arch$$ext ./cmd/gpudra || exit 1; \
	done

## image: the image (kubelet plugin, controller, gpudra CLI) as a docker-archive tarball, without Docker: bin/gpudra-image.tar, tagged $(IMAGE) and ghcr.io/gpudra/gpudra:$(CHART_VERSION) (the source chart's default)
image:
	VERSION=$(VERSION) REVISION=$(REVISION) IMAGE_ALSO_TAG=$(if $(filter ghcr.io/gpudra/gpudra:$(VERSION),$(IMAGE)),ghcr.io/gpudra/gpudra:$(CHART_VERSION)) \
		hack/image.sh $(BIN)/gpudra-image.tar $(IMAGE)

## chart: the Helm chart packaged with version and appVersion $(VERSION) (bin/gpudra-$(VERSION).tgz), so that helm upgrade to a new build renders its image
chart: $(HELM)
	$(HELM) package deployments/helm/gpudra --version $(VERSION) --app-version $(VERSION) -d $(BIN)

## release: one release into $(RELEASE_DIR) from a clean checkout (make release VERSION=v0.1.0): the linux/amd64+arm64 OCI image index, the chart package, the gpudra CLI for linux and darwin on amd64 and arm64, SHA256SUMS and an SBOM (hack/release.sh; docs/releasing.md)
release: $(HELM)
	HELM=$(HELM) VERSION=$(VERSION) REVISION=$(REVISION) hack/release.sh $(RELEASE_DIR)

## version: the version make stamps (hack/version.sh)
version:
	@echo $(VERSION)

## image-multiarch: the image for linux/amd64 and linux/arm64 as one OCI image index (bin/gpudra-image-oci.tar, with each architecture's docker archive beside it); arm64 is cross-compiled (needs gcc-aarch64-linux-gnu and libc6-dev-arm64-cross)
image-multiarch:
	VERSION=$(VERSION) REVISION=$(REVISION) hack/image-multiarch.sh $(BIN)/gpudra-image-oci.tar $(IMAGE)

## check-arm64: builds the linux/arm64 image and runs its binaries under qemu-aarch64 (--version, gpudra simulate on the gb200-tray profile); needs qemu-user and the cross compiler
check-arm64:
	VERSION=$(VERSION) REVISION=$(REVISION) hack/check-arm64.sh

# image-name prints the image make image tags (tests compare it with the chart's).
image-name:
	@echo $(IMAGE)

## gpu-check: on a machine with an NVIDIA GPU and no cluster: a read-only check of discovery, the published slices against the fake profile, CDI specs, health and MIG queries, into gpu-check-report.md (<= 5 min; refuses where there is no GPU; see hack/gpu-check.sh)
gpu-check:
	hack/gpu-check.sh

## gpu-check-bundle: gpudra and nvidia-cdi-hook for make gpu-check on a GPU machine with no Go: stripped, stamped with VERSION and REVISION, xz-compressed into bin/gpu-check-bundle (about 17 MB, ignored; docs/hardware.md has the command that runs the check from it)
gpu-check-bundle:
	VERSION=$(VERSION) REVISION=$(REVISION) hack/gpu-check.sh bundle

## e2e-local: the e2e suite on a single-node cluster built from source on this machine (root; see docs/development.md)
e2e-local:
	hack/localcluster/e2e-local.sh

## e2e-multinode: the multi-node scenarios (gang scheduling, PodGroup claims on one NVLink island, multi-node NVLink domains and IMEX channels, Kueue quotas, preemption, rolling upgrade across nodes) on a 7-node cluster built from source (two dgx-h100, one mixed, four fake GB200 trays in two NVLink domains), with Kueue (root; see docs/training.md, docs/nvlink.md)
e2e-multinode:
	GPUDRA_LC_NODES=$${GPUDRA_LC_NODES:-7} hack/localcluster/e2e-local.sh

## chaos-local: the chaos run on the local cluster (root): CHAOS_ITERATIONS (200) iterations of random pods and faults, invariants checked after each (see docs/development.md)
chaos-local:
	hack/localcluster/chaos.sh

## e2e-kind: the e2e suite on a kind cluster (needs Docker and kind)
e2e-kind:
	hack/kind/e2e-kind.sh

## demo: run the kubelet plugin in-process on a fake DGX H100 and show what each example pod gets
demo:
	$(GO) run ./cmd/gpudra simulate

## bench: the performance figures quoted in the docs
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/simulate/ ./internal/slicebuilder/ ./internal/check/

## bench-fleet: the real kube-scheduler on 100, 500 and 1000 fake GPU nodes, ResourceSlice layouts side by side, into docs/measurements/fleet.md (root; ~1.5 h on 2 cores; BENCH_FLEET_MODE=quick: 100 nodes, ~15 min; BENCH_FLEET_MODE=gb200: 1008 GB200 trays, 16-tray jobs with and without their NVLink channel; see hack/fleetbench/bench-fleet.sh)
bench-fleet:
	hack/fleetbench/bench-fleet.sh

## fuzz: search gpudra check's input path (YAML and CEL) for panics for a minute, and the config decoder for another
fuzz:
	$(GO) test ./internal/check -run '^$$' -fuzz FuzzCheck -fuzztime 1m
	$(GO) test ./pkg/api/resource/v1alpha1 -run '^$$' -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./pkg/api/resource/v1alpha1 -run '^$$' -fuzz FuzzMergeParameters -fuzztime 30s

## fmt: gofmt -s every Go file
fmt:
	gofmt -s -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -s -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt -s needed on:"; echo "$$out"; exit 1; fi

## fix: the mechanical fixes make verify asks for, on every Go file (re-runnable): the license header, gofmt -s, the three import groups
fix:
	hack/fix.sh

## verify: every static check, on all modules (hack/verify.sh): license header, gofmt -s, import groups, go vet, staticcheck, logcheck, go mod tidy, generated code, golden files, the laptop CLI without cgo, spelling; linters are built once into $(GPUDRA_CACHE)/tools
verify:
	hack/verify.sh

vet:
	$(GO) vet ./...
	$(GO) vet -tags chart ./deployments/helm/gpudra/
	$(GO) vet -tags e2e ./e2e/
	$(GO) vet -tags 'e2e chaos' ./e2e/
	$(GO) vet -tags 'e2e multinode' ./e2e/

## lint: an alias of verify
lint: verify

clean:
	rm -rf $(BIN)
