# gpudra — build, test and demo. Every target works offline on a machine with
# Go and gcc (go-nvml needs cgo, even for the fake GPUs).

GO          ?= go
BIN         ?= bin
export CGO_ENABLED := 1
# go-nvml's header marks many NVML calls deprecated; the warnings are noise.
export CGO_CFLAGS  := -Wno-deprecated-declarations
GOTESTFLAGS ?= -count=1

.PHONY: all build test demo fmt fmt-check vet lint bench clean

all: build

## build: the three binaries into ./bin
build:
	$(GO) build -o $(BIN)/gpudra-kubelet-plugin ./cmd/kubelet-plugin
	$(GO) build -o $(BIN)/gpudra ./cmd/gpudra

## test: unit, golden and in-process integration tests (no cluster, no GPU)
test: fmt-check vet
	$(GO) test $(GOTESTFLAGS) ./...

## demo: run the kubelet plugin in-process on a fake DGX H100 and show what each example pod gets
demo:
	$(GO) run ./cmd/gpudra simulate

## bench: the performance figures quoted in the docs
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/simulate/ ./pkg/slices/

fmt:
	gofmt -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## lint: gofmt and go vet (golangci-lint takes over 10 minutes to build and run on 2 cores; see README)
lint: fmt-check vet

clean:
	rm -rf $(BIN)
