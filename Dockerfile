# gpudra's image: the kubelet plugin and the controller. The plugin links
# go-nvml through cgo, so the runtime image needs glibc: distroless/base (glibc, no shell, root).
#
#   docker build -t ghcr.io/gpudra/gpudra:dev .
#
# Without Docker or a registry, hack/image.sh writes the same image as a
# tarball (see README).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
    go build -trimpath -ldflags "-s -w" -o /out/gpudra-kubelet-plugin ./cmd/kubelet-plugin
# NVIDIA's CDI hook runs on the host (the chart's init container copies it
# there), whose libc is not this one: linked statically.
RUN CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
    go build -trimpath -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' \
    -o /out/nvidia-cdi-hook github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook
RUN CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
    go build -trimpath -ldflags "-s -w" -o /out/gpudra-controller ./cmd/controller

FROM gcr.io/distroless/base-debian12
COPY --from=build /out/gpudra-kubelet-plugin /usr/bin/gpudra-kubelet-plugin
COPY --from=build /out/nvidia-cdi-hook /usr/bin/nvidia-cdi-hook
COPY --from=build /out/gpudra-controller /usr/bin/gpudra-controller
ENTRYPOINT ["/usr/bin/gpudra-kubelet-plugin"]
