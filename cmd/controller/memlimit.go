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

package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// memoryLimitEnv carries the container's memory limit in bytes; the chart
// sets it from resources.limits.memory (the downward API).
const memoryLimitEnv = "MEMORY_LIMIT"

// softMemoryLimit is the Go runtime's soft memory limit for a container
// limit and a ratio: 0 (no limit set) when the ratio is 0, the limit is
// unknown, or GOMEMLIMIT is set, which the runtime has applied already.
//
// Without one, the garbage collector lets the heap grow to twice what is
// live before it collects (GOGC=100): a replica whose live heap is half its
// limit is OOM-killed at the next burst of garbage. With one, it collects
// more often as the heap nears the limit, and only a live heap above the
// limit can kill it.
func softMemoryLimit(containerLimit string, ratio float64, goMemLimitSet bool) (int64, error) {
	if ratio < 0 || ratio > 1 {
		return 0, fmt.Errorf("--memory-limit-ratio %v: want a fraction from 0 to 1", ratio)
	}
	if ratio == 0 || containerLimit == "" || goMemLimitSet {
		return 0, nil
	}
	limit, err := strconv.ParseInt(containerLimit, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes", memoryLimitEnv, containerLimit)
	}
	return int64(float64(limit) * ratio), nil
}

// applySoftMemoryLimit sets the runtime's soft memory limit from the
// environment; it returns the limit set (0 for none).
func applySoftMemoryLimit(ratio float64) (int64, error) {
	_, goMemLimitSet := os.LookupEnv("GOMEMLIMIT")
	limit, err := softMemoryLimit(os.Getenv(memoryLimitEnv), ratio, goMemLimitSet)
	if err != nil || limit == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(limit)
	return limit, nil
}
