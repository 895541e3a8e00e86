/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package backend

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// fakeSharedObject is the smallest x86-64 ELF shared object that tools
// take for a library named soname: an ELF header, a PT_LOAD and a
// PT_DYNAMIC program header, a dynamic section with DT_SONAME, and the
// section headers that Go's debug/elf reads it through. NVIDIA's container
// toolkit reads the SONAME of the fake driver's libraries to make their
// libcuda.so.1-style links, and ldconfig (run by the ld cache hook in the
// container) puts them in the container's ld cache by it. There is no
// code: loading one fails, as it should for a fake driver.
func fakeSharedObject(soname string) []byte {
	dynstr := append(append([]byte{0}, soname...), 0)
	shstr := []byte("\x00.dynstr\x00.dynamic\x00.shstrtab\x00")
	const nameDynstr, nameDynamic, nameShstrtab = 1, 9, 18

	// The file's layout: headers, .dynstr, .dynamic, .shstrtab, then the
	// section headers.
	dynstrOff := uint64(elfHeaderSize + 2*elfProgHeaderSize)
	dynamicOff := align8(dynstrOff + uint64(len(dynstr)))
	dynamic := []struct{ tag, val uint64 }{
		{uint64(elf.DT_SONAME), 1},
		{uint64(elf.DT_STRTAB), dynstrOff},
		{uint64(elf.DT_STRSZ), uint64(len(dynstr))},
		{uint64(elf.DT_NULL), 0},
	}
	dynamicSize := uint64(len(dynamic) * elfDynSize)
	shstrOff := dynamicOff + dynamicSize
	shOff := align8(shstrOff + uint64(len(shstr)))
	fileSize := shOff + 4*elfSectionHeaderSize

	var w elfWriter
	w.header(shOff)
	// PT_LOAD: the whole file, read-only, at address 0.
	w.programHeader(elf.PT_LOAD, 0, fileSize, 0x1000)
	w.programHeader(elf.PT_DYNAMIC, dynamicOff, dynamicSize, 8)
	// .dynstr, .dynamic, .shstrtab.
	w.b.Write(dynstr)
	w.pad(dynamicOff)
	for _, d := range dynamic {
		w.put(d.tag)
		w.put(d.val)
	}
	w.b.Write(shstr)
	w.pad(shOff)
	w.section(0, 0, 0, 0, 0, 0, 0, 0)
	w.section(nameDynstr, uint32(elf.SHT_STRTAB), uint64(elf.SHF_ALLOC), dynstrOff, uint64(len(dynstr)), 0, 1, 0)
	w.section(nameDynamic, uint32(elf.SHT_DYNAMIC), uint64(elf.SHF_ALLOC|elf.SHF_WRITE), dynamicOff, dynamicSize, 1, 8, elfDynSize)
	w.section(nameShstrtab, uint32(elf.SHT_STRTAB), 0, shstrOff, uint64(len(shstr)), 0, 1, 0)
	return w.b.Bytes()
}

// The sizes of an ELF64 file's header, program and section headers, and
// dynamic entries.
const (
	elfHeaderSize        = 64
	elfProgHeaderSize    = 56
	elfSectionHeaderSize = 64
	elfDynSize           = 16
)

// elfWriter writes a little-endian ELF64 file, field by field.
type elfWriter struct{ b bytes.Buffer }

func (w *elfWriter) put(v any) { _ = binary.Write(&w.b, binary.LittleEndian, v) }

// pad writes zeros up to offset to.
func (w *elfWriter) pad(to uint64) {
	for uint64(w.b.Len()) < to {
		w.b.WriteByte(0)
	}
}

// header writes the ELF header of an x86-64 shared object with two
// program headers right after it, and four section headers at shOff, the
// last .shstrtab.
func (w *elfWriter) header(shOff uint64) {
	w.b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)})
	w.pad(16)
	w.put(uint16(elf.ET_DYN))
	w.put(uint16(elf.EM_X86_64))
	w.put(uint32(elf.EV_CURRENT))
	w.put(uint64(0))                    // entry
	w.put(uint64(elfHeaderSize))        // program headers
	w.put(shOff)                        // section headers
	w.put(uint32(0))                    // flags
	w.put(uint16(elfHeaderSize))        // header size
	w.put(uint16(elfProgHeaderSize))    // program header size
	w.put(uint16(2))                    // program headers
	w.put(uint16(elfSectionHeaderSize)) // section header size
	w.put(uint16(4))                    // section headers
	w.put(uint16(3))                    // index of .shstrtab
}

// programHeader writes a read-only segment of size bytes at off, loaded
// at the address off.
func (w *elfWriter) programHeader(typ elf.ProgType, off, size, align uint64) {
	w.put(uint32(typ))
	w.put(uint32(elf.PF_R))
	w.put(off)
	w.put(off)
	w.put(off)
	w.put(size)
	w.put(size)
	w.put(align)
}

// section writes a section header; its address is its offset (the file
// is loaded at 0).
func (w *elfWriter) section(name, typ uint32, flags, off, size uint64, link uint32, align, entsize uint64) {
	w.put(name)
	w.put(typ)
	w.put(flags)
	w.put(off)
	w.put(off)
	w.put(size)
	w.put(link)
	w.put(uint32(0))
	w.put(align)
	w.put(entsize)
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }
