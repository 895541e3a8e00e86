//go:build e2e

package e2e

import "k8s.io/apimachinery/pkg/api/resource"

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
