// Package discovery turns what NVML reports into gpudra's device model.
//
// It is one code path over any nvml.Interface: the real libnvidia-ml on a
// GPU node and the fake GPUs of package nvmlfake run exactly the same
// code, so whatever the tests prove against the fake holds on hardware as
// far as the fake is faithful. The caller owns the library's lifecycle
// (Init before, Shutdown after).
package discovery
