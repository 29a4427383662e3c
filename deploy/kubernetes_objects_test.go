package deploy_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// manifest is one Kubernetes object.
type manifest struct {
	file string
	node *yaml.Node
	head struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
}

func (m manifest) String() string {
	return fmt.Sprintf("%s (%s %s)", m.file, m.head.Kind, m.head.Metadata.Name)
}

// decode decodes the whole object into v.
func (m manifest) decode(t *testing.T, v any) {
	t.Helper()
	if err := m.node.Decode(v); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
}

// kustomization is the part of kustomization.yaml the tests read.
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
}

// k8sManifests parses every object under kubernetes/ (kustomization.yaml
// apart).
func k8sManifests(t *testing.T) ([]manifest, kustomization) {
	t.Helper()
	var out []manifest
	var k kustomization
	for _, f := range yamlFiles(t, "kubernetes") {
		docs := decodeAll(t, f)
		if filepath.Base(f) == "kustomization.yaml" {
			if len(docs) != 1 {
				t.Fatalf("%s: %d documents", f, len(docs))
			}
			if err := docs[0].Decode(&k); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			continue
		}
		for i, d := range docs {
			m := manifest{file: f, node: d}
			if err := d.Decode(&m.head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			if m.head.APIVersion == "" || m.head.Kind == "" || m.head.Metadata.Name == "" {
				t.Errorf("%s, document %d: apiVersion %q, kind %q, metadata.name %q: all three are required", f, i+1, m.head.APIVersion, m.head.Kind, m.head.Metadata.Name)
			}
			out = append(out, m)
		}
	}
	return out, k
}

// byKind returns the objects of one kind.
func byKind(ms []manifest, kind string) []manifest {
	var out []manifest
	for _, m := range ms {
		if m.head.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// the Kubernetes objects the tests read, as far as they read them.
type (
	selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	probe struct {
		HTTPGet *struct {
			Path string    `yaml:"path"`
			Port yaml.Node `yaml:"port"`
		} `yaml:"httpGet"`
		GRPC *struct {
			Port int `yaml:"port"`
		} `yaml:"grpc"`
	}
	envVar struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ConfigMapKeyRef  *struct{} `yaml:"configMapKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []envVar `yaml:"env"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		Lifecycle      *struct {
			PreStop *struct {
				Sleep *struct {
					Seconds int `yaml:"seconds"`
				} `yaml:"sleep"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext *struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	}
	deployment struct {
		Spec struct {
			Replicas int      `yaml:"replicas"`
			Selector selector `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec struct {
					TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
					SecurityContext               struct {
						RunAsNonRoot *bool `yaml:"runAsNonRoot"`
						RunAsUser    *int  `yaml:"runAsUser"`
					} `yaml:"securityContext"`
					Containers []container `yaml:"containers"`
					Volumes    []struct {
						Name      string `yaml:"name"`
						ConfigMap *struct {
							Name string `yaml:"name"`
						} `yaml:"configMap"`
						Secret *struct {
							SecretName string `yaml:"secretName"`
						} `yaml:"secret"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	service struct {
		Spec struct {
			ClusterIP string            `yaml:"clusterIP"`
			Selector  map[string]string `yaml:"selector"`
			Ports     []struct {
				Name        string    `yaml:"name"`
				Port        int       `yaml:"port"`
				TargetPort  yaml.Node `yaml:"targetPort"`
				AppProtocol string    `yaml:"appProtocol"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	configMap struct {
		Data map[string]string `yaml:"data"`
	}
	secret struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
	}
	pdb struct {
		Spec struct {
			Selector selector `yaml:"selector"`
		} `yaml:"spec"`
	}
	networkPolicy struct {
		Spec struct {
			PodSelector selector `yaml:"podSelector"`
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				From []struct {
					PodSelector       *selector `yaml:"podSelector"`
					NamespaceSelector *selector `yaml:"namespaceSelector"`
					IPBlock           *struct {
						CIDR string `yaml:"cidr"`
					} `yaml:"ipBlock"`
				} `yaml:"from"`
				Ports []struct {
					Port yaml.Node `yaml:"port"`
				} `yaml:"ports"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
)

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// imageName is an image reference without its tag or digest.
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// portOf resolves a probe's or Service's port (a number or a container
// port's name) to a number.
func portOf(t *testing.T, n yaml.Node, c container) int {
	t.Helper()
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	t.Errorf("port %q is neither a number nor a port of container %s", n.Value, c.Name)
	return -1
}

// quantityBytes parses a Kubernetes memory quantity (256Mi, 1Gi, 500M)
// or a GOMEMLIMIT value (218MiB, 1GiB, 123456).
func quantityBytes(q string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1}, {"", 1},
	} {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", q, err)
			}
			return v * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q: unknown unit", q)
}
