# gpudra's kubelet plugin image. The plugin links go-nvml through cgo, so the
# runtime image needs glibc: distroless/base (glibc, no shell, root).
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

FROM gcr.io/distroless/base-debian12
COPY --from=build /out/gpudra-kubelet-plugin /usr/bin/gpudra-kubelet-plugin
ENTRYPOINT ["/usr/bin/gpudra-kubelet-plugin"]
