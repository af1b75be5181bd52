// PDS_DID_PLC_URL mode: every PLC operation is also published to the directory (POST /<did>), and
// did:plc documents are read from it. A refusal fails the calling operation cleanly.
import { xrpcError } from '../errors.js'
import type { DidDocument, SignedPlcOp } from './plc.js'

const TIMEOUT_MS = 10_000

export async function publishOp(plcUrl: string, did: string, op: SignedPlcOp): Promise<void> {
  let res: Response
  try {
    res = await fetch(`${plcUrl}/${encodeURIComponent(did)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(op),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
  } catch {
    throw xrpcError('UpstreamFailure', 'The PLC directory could not be reached')
  }
  if (!res.ok) {
    const text = await res.text().catch(() => '')
    let message = text
    try {
      message = JSON.parse(text).message ?? text
    } catch {}
    throw xrpcError('InvalidRequest', `The PLC directory refused the operation: ${message.slice(0, 300) || res.status}`)
  }
}

/** the DID document the directory serves; undefined when it does not know the DID */
export async function resolveFromDirectory(plcUrl: string, did: string): Promise<DidDocument | undefined> {
  let res: Response
  try {
    res = await fetch(`${plcUrl}/${encodeURIComponent(did)}`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  } catch {
    throw xrpcError('UpstreamFailure', 'The PLC directory could not be reached')
  }
  if (res.status === 404 || res.status === 410) return undefined
  if (!res.ok) throw xrpcError('UpstreamFailure', `The PLC directory answered ${res.status}`)
  return (await res.json()) as DidDocument
}

/** the directory's current operation data for `did` (`GET /<did>/data`); undefined when unknown */
export async function plcData(plcUrl: string, did: string): Promise<{ verificationMethods?: Record<string, unknown> } | undefined> {
  let res: Response
  try {
    res = await fetch(`${plcUrl}/${encodeURIComponent(did)}/data`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  } catch {
    throw xrpcError('UpstreamFailure', 'The PLC directory could not be reached')
  }
  if (res.status === 404 || res.status === 410) return undefined
  if (!res.ok) throw xrpcError('UpstreamFailure', `The PLC directory answered ${res.status}`)
  return (await res.json()) as { verificationMethods?: Record<string, unknown> }
}

/** the directory's newest operation for `did` (`GET /<did>/log/last`); undefined when unknown */
export async function lastFromDirectory(plcUrl: string, did: string): Promise<SignedPlcOp | undefined> {
  let res: Response
  try {
    res = await fetch(`${plcUrl}/${encodeURIComponent(did)}/log/last`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  } catch {
    throw xrpcError('UpstreamFailure', 'The PLC directory could not be reached')
  }
  if (!res.ok) return undefined
  const op = (await res.json()) as SignedPlcOp
  return op && op.type === 'plc_operation' ? op : undefined
}
