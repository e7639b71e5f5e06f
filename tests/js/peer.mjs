// A js-libp2p peer in a libp2p private network (pnet spec), for Hearth's interop test.
//   node --import ./polyfill.mjs peer.mjs listen SWARM_KEY_FILE
//        echoes every stream on /hearth/echo/1; prints {"peer_id", "addrs"}
//   node --import ./polyfill.mjs peer.mjs dial SWARM_KEY_FILE MULTIADDR PROTOCOL HEX
//        sends HEX on a new stream, prints {"response": hex} or {"error": message}
import { readFileSync } from 'node:fs'
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { preSharedKey } from '@libp2p/pnet'
import { multiaddr } from '@multiformats/multiaddr'

const [mode, keyFile, target, protocol, hex] = process.argv.slice(2)
const node = await createLibp2p({
  addresses: { listen: mode === 'listen' ? ['/ip4/127.0.0.1/tcp/0'] : [] },
  transports: [tcp()],
  connectionEncrypters: [noise()],
  streamMuxers: [yamux()],
  connectionProtector: preSharedKey({ psk: readFileSync(keyFile) })
})
const say = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')

if (mode === 'listen') {
  await node.handle('/hearth/echo/1', async (stream) => {
    for await (const chunk of stream) {
      stream.send(chunk.subarray())
    }
    await stream.close()
  })
  say({ peer_id: node.peerId.toString(), addrs: node.getMultiaddrs().map(String) })
  setTimeout(() => process.exit(0), 60000) // bounded life
} else {
  try {
    const stream = await node.dialProtocol(multiaddr(target), protocol, {
      signal: AbortSignal.timeout(10000)
    })
    stream.send(Buffer.from(hex, 'hex'))
    const chunks = []
    let size = 0
    for await (const chunk of stream) {
      chunks.push(Buffer.from(chunk.subarray()))
      size += chunk.byteLength
      if (size >= 4 && size >= 4 + Buffer.concat(chunks).readUInt32BE(0)) break
    }
    say({ peer_id: node.peerId.toString(), response: Buffer.concat(chunks).toString('hex') })
  } catch (err) {
    say({ peer_id: node.peerId.toString(), error: String(err && err.message || err) })
  }
  await node.stop()
  process.exit(0)
}
