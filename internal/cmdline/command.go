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

package cmdline

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	baseversion "k8s.io/component-base/version"

	gpudraversion "github.com/gpudra/gpudra/internal/version"
)

// Command is one daemon's command line.
type Command struct {
	// Name is the binary's name: the flag set's and the API client's user
	// agent.
	Name string
	// Flags are the binary's flags; New adds the logging flags (-v,
	// --logging-format, ...) and --feature-gates.
	Flags *pflag.FlagSet
	// LookupEnv reads the environment (os.LookupEnv; tests replace it).
	LookupEnv func(key string) (string, bool)
	// Description is what the binary does, printed first by --help.
	Description string

	// env maps a flag's name to the environment variable that sets it.
	env         map[string]string
	logging     *logsapi.LoggingConfiguration
	featureGate featuregate.MutableVersionedFeatureGate
	// --help's sections (help.go).
	sectionOrder []string
	sectionFlags map[string][]string
	sectionOf    map[string]string
	logFlags     map[string]bool
}

// New returns the command line of the named binary, with the logging flags
// and --feature-gates (today the logging gates; chart value featureGates).
func New(name string) *Command {
	c := &Command{
		Name:         name,
		Flags:        pflag.NewFlagSet(name, pflag.ContinueOnError),
		LookupEnv:    os.LookupEnv,
		env:          map[string]string{},
		sectionFlags: map[string][]string{},
		sectionOf:    map[string]string{},
		logFlags:     map[string]bool{},
		logging:      logsapi.NewLoggingConfiguration(),
		featureGate:  featuregate.NewVersionedFeatureGate(version.MustParse(baseversion.DefaultKubeBinaryVersion)),
	}
	if err := logsapi.AddFeatureGates(c.featureGate); err != nil {
		panic(err) // the logging gates are known to the gate: cannot fail
	}
	before := map[string]bool{}
	c.Flags.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	logsapi.AddFlags(c.logging, c.Flags)
	c.Flags.VisitAll(func(f *pflag.Flag) {
		if !before[f.Name] {
			c.logFlags[f.Name] = true
		}
	})
	c.featureGate.AddFlag(c.Flags)
	// --help goes to standard output, as Kubernetes components print it;
	// pflag calls Usage for --help only (errors are returned, not printed).
	c.Flags.SetOutput(os.Stdout)
	c.Flags.Usage = func() { c.usage(c.Flags.Output()) }
	return c
}

// Env lets environment variables set flags, by flag name, and says so in
// each flag's help. The flags must be defined already.
func (c *Command) Env(byFlag map[string]string) {
	for name, variable := range byFlag {
		f := c.Flags.Lookup(name)
		if f == nil {
			panic(fmt.Sprintf("cmdline: environment variable %s for --%s, which is not defined", variable, name))
		}
		c.env[name] = variable
		f.Usage = strings.TrimSuffix(f.Usage, ".") + fmt.Sprintf(" (env %s).", variable)
	}
}

// EnvOf returns the environment variable that sets the flag, or "".
func (c *Command) EnvOf(flag string) string { return c.env[flag] }

// Parse reads the command line, then the environment for the flags that
// the command line left unset, and applies the logging flags. exit is true
// when the command ends here: with a nil error when --help or --version
// printed what was asked, else with the error (gpudraversion.ExitCode
// gives the exit status).
func (c *Command) Parse(args []string) (exit bool, err error) {
	if exit, err := c.parse(args); exit || err != nil {
		return exit, err
	}
	if err := logsapi.ValidateAndApply(c.logging, c.featureGate); err != nil {
		return false, fmt.Errorf("logging flags: %w", err)
	}
	return false, nil
}

// parse is Parse without applying the logging configuration, which a
// process can do only once. --help and --version (gpudraversion.ParseFlags)
// end the command; a command line or an environment value that does not
// parse is a gpudraversion.UsageError (exit status 2).
func (c *Command) parse(args []string) (exit bool, err error) {
	if done, err := gpudraversion.ParseFlags(c.Flags, args, c.Name, os.Stdout); done {
		return true, err
	}
	if err := c.ParseEnv(); err != nil {
		return true, gpudraversion.UsageError{Err: err}
	}
	return false, nil
}

// ParseEnv sets, from the environment, the flags that the command line
// left unset (Parse does it after the command line).
func (c *Command) ParseEnv() error {
	names := make([]string, 0, len(c.env))
	for name := range c.env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if c.Flags.Changed(name) {
			continue
		}
		variable := c.env[name]
		v, ok := c.LookupEnv(variable)
		if !ok || v == "" {
			continue
		}
		if err := c.Flags.Set(name, v); err != nil {
			return fmt.Errorf("environment variable %s=%q (flag --%s): %w", variable, v, name, err)
		}
	}
	return nil
}

// KubeConfig is the API client's configuration: from the kubeconfig file
// when one is named, else the in-cluster configuration of the pod's
// service account; the user agent is the binary's name.
func (c *Command) KubeConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = c.Name
	return cfg, nil
}

// KubeClient is the API client of KubeConfig.
func (c *Command) KubeClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := c.KubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
