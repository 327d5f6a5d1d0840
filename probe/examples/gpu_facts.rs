//! Dump the live GPU facts (the `daqtune.gpu/v1` document) as JSON on stdout, or write them
//! into a host root with `--write DIR`. Used to validate the probe on a GPU machine.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let t = std::time::Instant::now();
    let snap = daqtune_probe::gpu::gather_live();
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    match args.as_slice() {
        [flag, dir] if flag == "--write" => {
            match daqtune_probe::gpu::write_facts(std::path::Path::new(dir), &snap) {
                Ok(p) => eprintln!("wrote {}", p.display()),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
        [] => println!("{}", snap.to_json()),
        _ => {
            eprintln!("usage: gpu_facts [--write ROOT]");
            std::process::exit(2);
        }
    }
    eprintln!("gather_live total: {total_ms:.3} ms");
}
