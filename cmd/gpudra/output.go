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
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFlag is -o/--output, alike on every subcommand: the formats it
// takes always include json and yaml, which print the command's result as
// one object.
func outputFlag(cmd *cobra.Command, p *string, def string, formats ...string) {
	cmd.Flags().StringVarP(p, "output", "o", def, "output format: "+strings.Join(formats, ", "))
	cmd.Annotations = withAnnotation(cmd.Annotations, outputFormatsAnnotation, strings.Join(formats, ","))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
}

// outputFormatsAnnotation lists a command's -o formats, for the test that
// every subcommand takes json and yaml.
const outputFormatsAnnotation = "gpudra.io/output-formats"

func withAnnotation(a map[string]string, k, v string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	return a
}

// checkOutput refuses a format the command does not print (exit 2).
func checkOutput(cmd *cobra.Command, format string) error {
	formats := strings.Split(cmd.Annotations[outputFormatsAnnotation], ",")
	if !slices.Contains(formats, format) {
		return usageErrorf("-o %q: want %s", format, strings.Join(formats, ", "))
	}
	return nil
}

// writeObject prints v as JSON (indented) or YAML.
func writeObject(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case "json":
		_, err = w.Write(append(data, '\n'))
		return err
	case "yaml":
		return writeYAML(w, data)
	default:
		return fmt.Errorf("writeObject: format %q", format)
	}
}

// writeYAML prints a JSON document as YAML.
func writeYAML(w io.Writer, js []byte) error {
	data, err := yaml.JSONToYAML(js)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
