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

	"github.com/spf13/cobra"

	"github.com/gpudra/gpudra/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gpudra's version: release, git revision, Go version, platform",
		Long: `version prints the release (the Helm chart's appVersion), the git revision
the binary was built from, and its Go version and platform. gpudra-kubelet-plugin
and gpudra-controller print the same with --version, and export it as the
gpudra_build_info metric.

Exit status: 0, or 2 for a bad command line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			info := version.Get()
			if output == "text" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), cmd.Root().Name(), info)
				return err
			}
			return writeObject(cmd.OutOrStdout(), output, info)
		},
	}
	outputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}
