package gpu

// Health is what gpudra knows about a device's health.
type Health string

const (
	Healthy   Health = "Healthy"
	Unhealthy Health = "Unhealthy"
	Unknown   Health = "Unknown"
)

// HealthEvent reports a change in one GPU's health, e.g. after an XID error.
type HealthEvent struct {
	UUID   string
	Health Health
	// Reason is a short human-readable explanation ("XID 79: GPU has fallen
	// off the bus").
	Reason string
}
