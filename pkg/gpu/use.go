package gpu

// Use is how the claims prepared on a node hold one GPU.
type Use int

const (
	// Unused: no claim holds the GPU (or only claims with admin access,
	// which take nothing from others).
	Unused Use = iota
	// UsedWhole: claims hold the whole-GPU device: one claim alone, or
	// several through consumable-capacity shares. Either way the GPU
	// gives no MIG partition.
	UsedWhole
	// UsedByMIG: claims hold MIG partitions of the GPU.
	UsedByMIG
)
