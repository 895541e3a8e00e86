package simulate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Manifest is one object decoded from a YAML file.
type Manifest struct {
	Source string // file name and document index, for messages
	Object runtime.Object
}

// DecodeManifests decodes every document of a multi-document YAML stream
// into typed Kubernetes objects (DeviceClass, ResourceClaimTemplate,
// ResourceClaim, Pod, ...). Empty documents are skipped.
func DecodeManifests(source string, data []byte) ([]Manifest, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	decoder := scheme.Codecs.UniversalDeserializer()
	var out []Manifest
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || isOnlyComments(doc) {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		out = append(out, Manifest{Source: fmt.Sprintf("%s#%d", source, i), Object: obj})
	}
}

func isOnlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && string(line) != "---" {
			return false
		}
	}
	return true
}
