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
	"strings"
	"testing"
	"time"

	gpudraversion "github.com/gpudra/gpudra/internal/version"
)

// testFlags is a command line with one flag of each kind the daemons use.
type testFlags struct {
	name     string
	port     int
	enabled  bool // default true
	other    bool // default false
	interval time.Duration
	list     []string
}

func newTestCommand(env map[string]string) (*Command, *testFlags) {
	f := &testFlags{}
	c := New("test")
	c.Flags.StringVar(&f.name, "name", "default-name", "A name.")
	c.Flags.IntVar(&f.port, "port", 51515, "A port.")
	c.Flags.BoolVar(&f.enabled, "enabled", true, "A switch.")
	c.Flags.BoolVar(&f.other, "other", false, "Another switch.")
	c.Flags.DurationVar(&f.interval, "interval", 10*time.Second, "An interval.")
	c.ListVar(&f.list, "list", []string{"x"}, "A list.")
	c.Env(map[string]string{"name": "NAME", "port": "PORT", "enabled": "ENABLED", "interval": "INTERVAL", "list": "LIST", "other": "OTHER"})
	c.LookupEnv = func(key string) (string, bool) {
		v, ok := env[key]
		return v, ok
	}
	return c, f
}

func TestParse(t *testing.T) {
	defaults := testFlags{name: "default-name", port: 51515, enabled: true, interval: 10 * time.Second, list: []string{"x"}}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    testFlags
		wantErr string // a substring of the error; "" for none
	}{
		{name: "defaults", want: defaults},
		{name: "environment over the default",
			env:  map[string]string{"NAME": "n", "PORT": "9", "ENABLED": "false", "INTERVAL": "1m", "LIST": "a, b,,c"},
			want: testFlags{name: "n", port: 9, enabled: false, interval: time.Minute, list: []string{"a", "b", "c"}}},
		{name: "command line over the environment",
			args: []string{"--name=cli", "--port=7", "--enabled=true", "--list=d"},
			env:  map[string]string{"NAME": "n", "PORT": "9", "ENABLED": "false", "LIST": "a"},
			want: testFlags{name: "cli", port: 7, enabled: true, interval: 10 * time.Second, list: []string{"d"}}},
		{name: "an empty variable counts as unset",
			env:  map[string]string{"NAME": "", "PORT": "", "ENABLED": "", "LIST": ""},
			want: defaults},
		// strconv.ParseBool: the values the chart writes, and 1, mean
		// what they say (DEVICE_METADATA=1 used to turn metadata off).
		{name: "a bool variable of 1 is true", env: map[string]string{"OTHER": "1"},
			want: testFlags{name: "default-name", port: 51515, enabled: true, other: true, interval: 10 * time.Second, list: []string{"x"}}},
		{name: "a bool variable of 0 is false", env: map[string]string{"ENABLED": "0"},
			want: testFlags{name: "default-name", port: 51515, interval: 10 * time.Second, list: []string{"x"}}},
		{name: "a bool variable that is no bool fails", env: map[string]string{"ENABLED": "yes"},
			wantErr: `environment variable ENABLED="yes" (flag --enabled)`},
		{name: "an int variable that is no number fails", env: map[string]string{"PORT": "80a"},
			wantErr: `environment variable PORT="80a" (flag --port)`},
		{name: "a duration variable without a unit fails", env: map[string]string{"INTERVAL": "10"},
			wantErr: `environment variable INTERVAL="10" (flag --interval)`},
		{name: "a list given twice adds up", args: []string{"--list=a,b", "--list", " c"},
			want: testFlags{name: "default-name", port: 51515, enabled: true, interval: 10 * time.Second, list: []string{"a", "b", "c"}}},
		{name: "an unknown flag fails", args: []string{"--nope"}, wantErr: "unknown flag: --nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := newTestCommand(tc.env)
			c.Flags.SetOutput(&strings.Builder{})
			exit, err := c.parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				// A bad command line or environment ends the command
				// with exit status 2, as a usage error.
				if !exit || gpudraversion.ExitCode(err) != 2 {
					t.Errorf("exit %v, exit status %d; want the command to end with 2", exit, gpudraversion.ExitCode(err))
				}
				return
			}
			if err != nil || exit {
				t.Fatalf("parse: exit %v, error %v", exit, err)
			}
			if f.name != tc.want.name || f.port != tc.want.port || f.enabled != tc.want.enabled || f.other != tc.want.other || f.interval != tc.want.interval || strings.Join(f.list, "|") != strings.Join(tc.want.list, "|") {
				t.Errorf("got %+v, want %+v", *f, tc.want)
			}
		})
	}
}

func TestHelpExits(t *testing.T) {
	c, _ := newTestCommand(nil)
	var out strings.Builder
	c.Flags.SetOutput(&out)
	exit, err := c.parse([]string{"--help"})
	if err != nil || !exit {
		t.Fatalf("--help: exit %v, error %v; want exit and no error", exit, err)
	}
	// Each flag's help names its variable; the logging flags are there.
	for _, want := range []string{"A port (env PORT).", "--logging-format", "--feature-gates"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not show %q:\n%s", want, out.String())
		}
	}
}

func TestEnvOfAnUndefinedFlagPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Env of an undefined flag did not panic")
		}
	}()
	New("test").Env(map[string]string{"nope": "NOPE"})
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"a":             "a",
		"a,b":           "a|b",
		" a , b ,, ":    "a|b",
		",,":            "",
		"one two,three": "one two|three",
	} {
		if got := strings.Join(SplitList(in), "|"); got != want {
			t.Errorf("SplitList(%q) = %q, want %q", in, got, want)
		}
	}
}
