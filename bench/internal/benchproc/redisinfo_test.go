package benchproc

import "testing"

func TestParseRedisStats(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.50\r\nused_cpu_user:2.25\r\nused_cpu_sys_children:9.0\r\nused_cpu_sys_main_thread:1.25\r\nused_cpu_user_main_thread:2.00\r\n" +
		"# Commandstats\r\ncmdstat_evalsha:calls=10,usec=200,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\ncmdstat_eval:calls=2,usec=50,usec_per_call=25.00\r\ncmdstat_incr:calls=7,usec=7,usec_per_call=1.00\r\ncmdstat_fcall:calls=5,usec=50,usec_per_call=10.00\r\n"
	s := ParseRedisStats(info)
	if s.CPU != 3.75 || s.CPUMain != 3.25 || !s.HasMain || s.Scripts != 17 || s.Cmds["incr"] != (CmdStat{Calls: 7, Usec: 7}) {
		t.Fatalf("parsed %+v", s)
	}
	if s := ParseRedisStats("used_cpu_sys:1\r\nused_cpu_user:1\r\n"); s.HasMain {
		t.Fatalf("main thread figures reported where INFO has none: %+v", s)
	}
}
