// Command gpudra is gpudra's offline tool: it needs no cluster, no Docker and
// no GPU. `gpudra simulate` runs the kubelet plugin in-process on fake GPUs
// and shows what example pods would receive.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "gpudra",
		Short:         "Offline tools for the gpudra DRA driver",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newSimulateCommand())
	root.AddCommand(newCheckCommand())
	root.AddCommand(newInventoryCommand())
	root.AddCommand(newMigrateCommand())
	if err := root.Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code) // gpudra check has reported already
		}
		fmt.Fprintln(os.Stderr, "gpudra:", err)
		os.Exit(1)
	}
}
