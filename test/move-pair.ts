// Two servers an account moves between, sharing a PLC directory (@did-plc/server in memory) and
// an HTTP mail sink, all on loopback: the set-up every test of a move starts from.
import { createRequire } from 'node:module'
import { startTestPds, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

export type MovePair = { plcUrl: string; sink: MailSink; origin: TestPds; dest: TestPds; stop(): Promise<void> }

export async function startMovePair(): Promise<MovePair> {
  const plc = PlcServer.create({ db: Database.mock(), port: 0 })
  const plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
  const sink = await startMailSink()
  const origin = await startTestPds({ PDS_DID_PLC_URL: plcUrl, ...sinkEnv(sink) })
  const dest = await startTestPds({ PDS_DID_PLC_URL: plcUrl, PDS_HOSTNAME: 'pds2.localhost', ...sinkEnv(sink) })
  const stop = async () => {
    await origin.stop()
    await dest.stop()
    await sink.close()
    await plc.destroy()
  }
  return { plcUrl, sink, origin, dest, stop }
}
