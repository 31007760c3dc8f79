package helm_test

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestHeadless: service.headless.enabled adds, per mode, a Service
// without a cluster IP on the grpc container port, whose DNS name
// resolves to that mode's pods only, for gRPC clients with a dns:///
// target and round_robin; off, the chart makes none.
func TestHeadless(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		modes        []string // with a headless Service; none when off
		appProtocol  string
		grpcPort     int32
	}{
		{"off by default", dsn + "mode: both\n", nil, "", 0},
		{"off", dsn + "service: {headless: {enabled: false}}\n", nil, "", 0},
		{"segment", dsn + "service: {headless: {enabled: true}}\n", []string{"segment"}, "kubernetes.io/h2c", 9090},
		{"both", dsn + "mode: both\nservice: {headless: {enabled: true}}\n", []string{"segment", "snowflake"}, "kubernetes.io/h2c", 9090},
		{"other grpc port", dsn + "grpcContainerPort: 7000\nservice: {headless: {enabled: true}, grpc: {port: 443}}\n", []string{"segment"}, "kubernetes.io/h2c", 7000},
		{"ClusterIP Service without grpc", dsn + "service: {headless: {enabled: true}, grpc: {enabled: false}}\n", []string{"segment"}, "kubernetes.io/h2c", 9090},
		{"TLS", dsn + "tls: {enabled: true, secretName: cert}\nservice: {type: LoadBalancer, headless: {enabled: true}, annotations: {lb: x}}\n", []string{"segment"}, "https", 9090},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mustDecode(t, tc.values, nil)
			var headless []string
			for n := range o.services {
				if strings.HasSuffix(n, "-headless") {
					headless = append(headless, n)
				}
			}
			if len(headless) != len(tc.modes) {
				t.Fatalf("headless Services %v, want one per mode of %v", headless, tc.modes)
			}
			for _, mode := range tc.modes {
				name := prefix + mode + "-headless"
				s := o.services[name]
				if s == nil {
					t.Fatalf("no Service %s among %v", name, headless)
				}
				if s.Spec.ClusterIP != corev1.ClusterIPNone || s.Spec.Type != corev1.ServiceTypeClusterIP {
					t.Errorf("%s: type %s, clusterIP %q, want ClusterIP None", name, s.Spec.Type, s.Spec.ClusterIP)
				}
				if len(s.Annotations) != 0 {
					t.Errorf("%s: annotations %v, want none (service.annotations are the load balancer's)", name, s.Annotations)
				}
				if len(s.Spec.Ports) != 1 {
					t.Fatalf("%s: ports %+v, want grpc only", name, s.Spec.Ports)
				}
				p := s.Spec.Ports[0]
				if p.Name != "grpc" || p.TargetPort.String() != "grpc" || p.Port != tc.grpcPort || p.AppProtocol == nil || *p.AppProtocol != tc.appProtocol {
					t.Errorf("%s: port %+v, want grpc on %d targeting grpc, appProtocol %s", name, p, tc.grpcPort, tc.appProtocol)
				}
				// The port clients dial is the pods' own.
				c := o.deployments[prefix+mode].Spec.Template.Spec.Containers[0]
				if c.Ports[1].Name != "grpc" || c.Ports[1].ContainerPort != p.Port {
					t.Errorf("%s: port %d, the pods' grpc port is %+v", name, p.Port, c.Ports[1])
				}
				for dn, d := range o.deployments {
					selects := labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))
					if selects != (dn == prefix+mode) {
						t.Errorf("%s selects the pods of %s: %v", name, dn, selects)
					}
				}
				want := "dns:///" + name + "." + namespace + ".svc:" + strconv.Itoa(int(tc.grpcPort))
				if !strings.Contains(o.notes, want) {
					t.Errorf("NOTES.txt does not give the target %s:\n%s", want, o.notes)
				}
			}
			if len(tc.modes) == 0 && strings.Contains(o.notes, "headless") {
				t.Errorf("NOTES.txt names a headless Service that is off:\n%s", o.notes)
			}
		})
	}
}

// TestHeadlessNotScraped: the ServiceMonitor selects the chart's
// Services by label, the headless ones too, but scrapes the port http,
// which a headless Service does not have: each pod is scraped once.
func TestHeadlessNotScraped(t *testing.T) {
	o := mustDecode(t, dsn+"mode: both\nservice: {headless: {enabled: true}}\nmetrics: {serviceMonitor: {enabled: true}}\n", nil)
	sm := o.serviceMonitors[release+"-idgen"]
	if sm == nil || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor %+v", sm)
	}
	scraped := 0
	for n, s := range o.services {
		if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Name == sm.Spec.Endpoints[0].Port {
				scraped++
				if strings.HasSuffix(n, "-headless") {
					t.Errorf("the ServiceMonitor scrapes headless Service %s", n)
				}
			}
		}
	}
	if scraped != 2 {
		t.Errorf("the ServiceMonitor scrapes %d Services, want the 2 modes'", scraped)
	}
}
