package main

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	_ "k8s.io/dynamic-resource-allocation/kubeletplugin"
	_ "k8s.io/dynamic-resource-allocation/resourceslice"
	_ "k8s.io/dynamic-resource-allocation/structured"
	_ "k8s.io/dynamic-resource-allocation/cel"
	_ "k8s.io/dynamic-resource-allocation/deviceattribute"
	_ "k8s.io/dynamic-resource-allocation/resourceclaim"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "tags.cncf.io/container-device-interface/pkg/cdi"
	_ "k8s.io/component-base/logs/api/v1"
	_ "sigs.k8s.io/yaml"
	_ "github.com/spf13/pflag"
	_ "github.com/spf13/cobra"
	_ "github.com/prometheus/client_golang/prometheus"
)
func main() {}
